package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// messageList is "messages", each message held to messageFields as the
// request is to the field table: a field no message has, or a value of the
// wrong kind, is a 400 naming it and the message's index.
type messageList []chatMessage

// messageFields are the fields a message may have: chatMessage's, and
// those of tool use (name, tool_call_id), which the template sees. The
// kinds are the JSON values each takes ("" : any, checked where it is
// read).
var messageFields = map[string][]string{
	"role":         {"string"},
	"content":      {"string", "array", "null"},
	"name":         {"string", "null"},
	"tool_calls":   nil,
	"tool_call_id": {"string", "null"},
	// An assistant turn a client sends back as it got it.
	"reasoning_content": {"string", "null"},
	"function_call":     nil,
}

func (l *messageList) UnmarshalJSON(b []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return &fieldError{"messages", `want an array of {"role", "content"} objects`}
	}
	out := make(messageList, len(raws))
	for i, raw := range raws {
		at := fmt.Sprintf("messages[%d]", i)
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
			return &fieldError{at, "want an object with \"role\" and \"content\""}
		}
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			kinds, ok := messageFields[k]
			if !ok && !slices.Contains(jsonFields(reflect.TypeFor[chatMessage]()), k) {
				return &fieldError{at + "." + k, "is not a field of a message (it takes " + strings.Join(messageFieldNames(), ", ") + ")"}
			}
			if got := jsonKindOf(fields[k]); len(kinds) > 0 && !slices.Contains(kinds, got) {
				return &fieldError{at + "." + k, fmt.Sprintf("want %s, got %s", strings.Join(kinds, " or "), got)}
			}
		}
		if err := checkParts(fields["content"], at+".content"); err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return &fieldError{at, err.Error()}
		}
	}
	*l = out
	return nil
}

// checkParts holds a content array to text parts; an image (or audio, or
// file) part is refused by name, the model reading text only.
func checkParts(raw json.RawMessage, at string) error {
	if jsonKindOf(raw) != "array" {
		return nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return &fieldError{at, "want an array of parts"}
	}
	for j, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		var part map[string]json.RawMessage
		if err := json.Unmarshal(p, &part); err != nil || part == nil {
			return &fieldError{pat, `want a {"type": "text", "text": "..."} object`}
		}
		var typ string
		if err := json.Unmarshal(part["type"], &typ); err != nil {
			return &fieldError{pat + ".type", `want a string ("text")`}
		}
		if typ != "text" {
			return &fieldError{pat, fmt.Sprintf("%q parts are not supported: only text parts are (glint's models read text)", typ)}
		}
		for k, v := range part {
			switch {
			case k == "type":
			case k == "text":
				if jsonKindOf(v) != "string" {
					return &fieldError{pat + ".text", "want string, got " + jsonKindOf(v)}
				}
			case k == "cache_control": // Anthropic-style hint some clients add
			default:
				return &fieldError{pat + "." + k, "is not a field of a text part (type, text)"}
			}
		}
		if _, ok := part["text"]; !ok {
			return &fieldError{pat, `a text part needs "text"`}
		}
	}
	return nil
}

func messageFieldNames() []string {
	names := jsonFields(reflect.TypeFor[chatMessage]())
	for k := range messageFields {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// jsonKindOf names the kind of a JSON value as the errors say it.
func jsonKindOf(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
