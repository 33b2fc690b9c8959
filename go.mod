module github.com/glint-llm/glint

go 1.26.0

require (
	github.com/openai/openai-go/v3 v3.96.0
	github.com/urfave/cli/v2 v2.27.7
	github.com/x448/float16 v0.8.4
	github.com/yalue/onnxruntime_go v1.27.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
)
