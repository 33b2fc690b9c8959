// Node clients against a running `generate serve` (TestNodeClients): the
// official openai package, and LangChain.js over it. Random weights: what
// holds the replies to a schema is the server's constrained decoding.
// Prints one JSON line per part: {"part", "ok"} (with what it got, "got"),
// {"part", "skipped"} or {"part", "error"}.
import OpenAI from "openai";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const baseURL = process.env.GLINT_BASE_URL;
const model = "llama3-tiny";
const report = (part, r) => console.log(JSON.stringify({ part, ...r }));

async function part(name, fn) {
  try {
    const r = await fn();
    report(name, r.skipped ? r : { ok: "true", got: JSON.stringify(r.got) });
  } catch (e) {
    report(name, { error: String(e && e.stack ? e.stack : e) });
  }
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// (a) the official client: a chat completion, and the same one streamed.
await part("a", async () => {
  const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
  const req = { model, messages: [{ role: "user", content: "Say hello." }], max_tokens: 12, temperature: 0 };
  const r = await client.chat.completions.create(req);
  const c = r.choices[0];
  check(c.message.role === "assistant" && typeof c.message.content === "string", `message ${JSON.stringify(c.message)}`);
  check(r.usage.completion_tokens > 0 && r.usage.prompt_tokens > 0, `usage ${JSON.stringify(r.usage)}`);
  const s = await client.chat.completions.create({ ...req, stream: true });
  let text = "";
  let finish = null;
  for await (const ch of s) {
    text += ch.choices[0]?.delta?.content ?? "";
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  check(text === c.message.content, `streamed ${JSON.stringify(text)}, whole ${JSON.stringify(c.message.content)}`);
  check(finish === c.finish_reason, `streamed finish ${finish}, whole ${c.finish_reason}`);
  return { got: c.message.content };
});

const chat = new ChatOpenAI({ model, apiKey: "unused", temperature: 0, maxTokens: 300, maxRetries: 0, configuration: { baseURL } });

// (b) LangChain's structured output through response_format json_schema.
await part("b", async () => {
  const person = z.object({
    name: z.string().max(12),
    age: z.number().int().min(0).max(130),
    colour: z.enum(["red", "green", "blue"]),
    pets: z.array(z.string().max(8)).max(2),
    adult: z.boolean(),
    code: z.string().regex(/^[A-Z]{2}-\d{3}$/),
  });
  const structured = chat.withStructuredOutput(person, { method: "jsonSchema", name: "person" });
  const obj = await structured.invoke("Describe a person.");
  const p = person.safeParse(obj);
  check(p.success, `${JSON.stringify(obj)} is not valid: ${p.error}`);
  return { got: obj };
});

// (c) tools: a forced tool call whose arguments fit the tool's schema.
await part("c", async () => {
  const args = z.object({ city: z.string().max(12), days: z.number().int().min(1).max(7) });
  const tools = [{
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather forecast of a city.",
      parameters: {
        type: "object",
        properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1, maximum: 7 } },
        required: ["city", "days"],
        additionalProperties: false,
      },
    },
  }];
  let msg;
  try {
    msg = await chat.bindTools(tools, { tool_choice: "get_weather" }).invoke("What is the weather in Paris?");
  } catch (e) {
    const text = String(e && e.message);
    if ((e?.status === 400 || e?.error?.code === 400 || /400/.test(text)) && /tool/.test(text)) {
      return { skipped: `the server refuses tools: ${text}` };
    }
    throw e;
  }
  check(msg.tool_calls?.length >= 1, `no tool_calls in ${JSON.stringify(msg)}`);
  const call = msg.tool_calls[0];
  check(call.name === "get_weather", `tool ${call.name}`);
  const p = args.safeParse(call.args);
  check(p.success, `arguments ${JSON.stringify(call.args)} are not valid: ${p.error}`);
  return { got: call };
});
