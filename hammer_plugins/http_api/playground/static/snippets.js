// Copy a call as code: the call as JSON, and the request that made it as Python (ChatHammer, in process) and as
// curl (POST /v1/chat/completions on this server: run it and the same call comes back, at temperature 0). Text
// only: the page shows each snippet with textContent and copies it to the clipboard.
"use strict";

// The request the page sent, as /v1/chat/completions takes it whole (not streamed; the page's own fields out).
function plainRequest(body) {
  const plain = Object.assign({}, body, { stream: false });
  delete plain.stream_options;
  delete plain.relevance_gate;  // the page's setting: /v1/chat/completions runs with the server's
  return plain;
}

function callJson(call) {
  let args = call.function.arguments;
  try { args = JSON.parse(args || "{}"); } catch (e) { /* shown as the model wrote it */ }
  return JSON.stringify({ id: call.id, name: call.function.name, arguments: args }, null, 2);
}

function shellQuote(text) {
  return "'" + text.replace(/'/g, "'\\''") + "'";
}

function curlSnippet(body, withKey) {
  const lines = ["curl -sS " + shellQuote(location.origin + "/v1/chat/completions"),
                 "  -H 'Content-Type: application/json'"];
  // The key is never written into the snippet: it is read from the environment where the command runs.
  if (withKey) lines.push("  -H \"Authorization: Bearer $HAMMER_SERVER_API_KEY\"");
  lines.push("  -d " + shellQuote(JSON.stringify(plainRequest(body))));
  return lines.join(" \\\n");
}

function pyString(text) {
  return JSON.stringify(text);  // a JSON string is a valid Python string literal
}

function pythonSnippet(body) {
  const plain = plainRequest(body);
  const options = [`temperature=${Number(plain.temperature)}`, `max_tokens=${Number(plain.max_tokens)}`,
                   `mask_names=${plain.mask_names ? "True" : "False"}`,
                   `constrained=${plain.constrained ? "True" : "False"}`];
  if (body.relevance_gate !== undefined) options.push(`relevance_gate=${body.relevance_gate ? "True" : "False"}`);
  const lines = ["import json", "", "from langchain_hammer import ChatHammer", "",
                 "# The model: the one Hammer finds (a pulled Hammer model, else the embedded stand-in);",
                 "# pass model=\"hammer2.1-1.5b\" or model_path=\"....gguf\" to name one.",
                 `llm = ChatHammer(${options.join(", ")})`,
                 "tools = json.loads(" + pyString(JSON.stringify(plain.tools || [])) + ")",
                 "messages = json.loads(" + pyString(JSON.stringify(plain.messages)) + ")"];
  const choice = plain.tool_choice === undefined ? "" : ", tool_choice=" +
    (typeof plain.tool_choice === "string" ? pyString(plain.tool_choice) : pyString(plain.tool_choice.function.name));
  lines.push(`reply = llm.bind_tools(tools${choice}).invoke(messages)`, "print(reply.tool_calls or reply.content)");
  return lines.join("\n");
}
