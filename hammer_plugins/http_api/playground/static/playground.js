// The Hammer playground: tools on and off, a streamed chat through /playground/api/chat (Chat Completions), call
// cards, and what the model read (POST /playground/api/inspect). Every name and text from tools, results and the
// model is put in the page as text (textContent), never as markup; the Content-Security-Policy forbids inline code
// besides. Every helper request carries the server's per-start token, which the address hammer printed holds
// (#token=...: a fragment, never sent to the server); the page keeps it in this tab's session storage, which a
// page of another origin cannot read.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_HEADER = "x-hammer-playground-token";
const state = { model: "hammer", tools: [], enabled: new Set(), costs: {}, messages: [], slotHistory: [], busy: false,
                demo: [], window: 0, budget: 0, key: sessionStorage.getItem("hammer-key") || "",
                token: takeToken() };

// The token from the address (then taken out of it, so it is not left in the history or a bookmark), else the
// one this tab kept.
function takeToken() {
  const given = new URLSearchParams(location.hash.slice(1)).get("token");
  if (given) {
    sessionStorage.setItem("hammer-playground-token", given);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return given || sessionStorage.getItem("hammer-playground-token") || "";
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function headers() {
  const h = { "content-type": "application/json" };
  if (state.key) h.authorization = "Bearer " + state.key;
  if (state.token) h[TOKEN_HEADER] = state.token;
  return h;
}

// A failed reply's message; a missing key or token is asked for.
async function errorOf(reply) {
  if (reply.status === 401) askFor("key");
  try {
    const body = await reply.json();
    if (body.error && body.error.code === "playground_token_required") askFor("token");
    return (body.error && (body.error.message || body.error)) || reply.statusText;
  } catch (e) {
    return reply.status + " " + reply.statusText;
  }
}

async function post(path, body) {
  const reply = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
  if (!reply.ok) throw new Error(await errorOf(reply));
  return reply.json();
}

function askFor(what) {
  $(what + "-box").hidden = false;
  $(what).focus();
}

function show(where, message) {
  $(where).textContent = message || "";
  $(where).hidden = !message;
}

// ------------------------------------------------------------------ tools
function asTool(item) {
  if (item && item.type === "function" && item.function) return item;
  if (item && typeof item.name === "string") return { type: "function", function: item };
  throw new Error("each tool must be an OpenAI function tool or an object with a name: got " +
                  JSON.stringify(item).slice(0, 80));
}

function nameOf(tool) { return tool.function.name; }

async function setTools(candidate, enable) {
  // Checked by the server as the APIs check tools: a bad schema is the same 400, and nothing is lost.
  const checked = await post("/playground/api/tools", { tools: candidate });
  state.tools = candidate;
  state.costs = Object.fromEntries(checked.tools.map((t) => [t.name, t.cost]));
  state.window = checked.context_window;
  state.budget = checked.tool_budget;
  for (const name of enable) state.enabled.add(name);
  renderTools();
}

async function addTools(items) {
  show("tools-error", "");
  try {
    const added = (Array.isArray(items) ? items : [items]).map(asTool);
    const names = new Set(added.map(nameOf));
    const kept = state.tools.filter((t) => !names.has(nameOf(t)));
    await setTools(kept.concat(added), added.map(nameOf));
    return true;
  } catch (e) {
    show("tools-error", e.message);
    return false;
  }
}

function renderTools() {
  const list = $("tools");
  list.replaceChildren();
  let total = 0;
  for (const tool of state.tools) {
    const name = nameOf(tool);
    const cost = state.costs[name] || 0;
    const on = state.enabled.has(name);
    if (on) total += cost;
    const item = el("li", null, "tool");
    const label = el("label");
    const box = el("input");
    box.type = "checkbox";
    box.checked = on;
    box.dataset.tool = name;
    box.addEventListener("change", () => {
      if (box.checked) state.enabled.add(name); else state.enabled.delete(name);
      renderTools();
    });
    label.append(box, el("span", name, "tool-name"));
    const bar = el("span", null, "bar");
    const fill = el("span", null, "fill");
    fill.style.width = state.window ? Math.min(100, (100 * cost) / state.window).toFixed(1) + "%" : "0";
    bar.append(fill);
    item.append(label, el("span", "≈" + cost + " tokens", "cost"), bar,
                el("div", tool.function.description || "", "description"));
    list.append(item);
  }
  const budget = state.budget ? ` (tool budget ${state.budget}: a larger set is narrowed per question)` : "";
  $("budget").textContent = `On: ${state.enabled.size} tools, ≈${total} tokens of a ${state.window}-token context${budget}`;
  const choice = $("tool-choice");
  const current = choice.value;
  choice.replaceChildren(...["auto", "required", "none"].map((v) => el("option", v)));
  for (const name of state.enabled) choice.append(el("option", name));
  choice.value = [...choice.options].some((o) => o.value === current) ? current : "auto";
}

// ------------------------------------------------------------------ chat
function enabledTools() { return state.tools.filter((t) => state.enabled.has(nameOf(t))); }

function requestBody() {
  const tools = enabledTools();
  const choice = $("tool-choice").value;
  const body = { model: state.model, messages: state.messages, stream: true, stream_options: { include_usage: true },
                 mask_names: $("mask").checked, constrained: $("constrained").checked,
                 temperature: Number($("temperature").value), max_tokens: Number($("max-tokens").value) };
  if (tools.length) {
    body.tools = tools;
    body.tool_choice = ["auto", "required", "none"].includes(choice) ? choice
      : { type: "function", function: { name: choice } };
  }
  return body;
}

function valid(call) {
  const tool = state.tools.find((t) => nameOf(t) === call.function.name);
  let args;
  try { args = JSON.parse(call.function.arguments || "{}"); } catch (e) { return "arguments are not JSON"; }
  if (!tool) return "no such tool";
  const required = (tool.function.parameters && tool.function.parameters.required) || [];
  const missing = required.filter((k) => !(k in args));
  return missing.length ? "missing " + missing.join(", ") : "valid";
}

function callCard(call, turn) {
  const card = el("div", null, "call");
  card.dataset.call = call.id;
  card.append(el("div", call.function.name, "call-name"));
  let pretty = call.function.arguments;
  try { pretty = JSON.stringify(JSON.parse(pretty), null, 1); } catch (e) { /* shown as written */ }
  card.append(el("pre", pretty, "call-args"));
  const verdict = valid(call);
  card.append(el("div", verdict, verdict === "valid" ? "validity ok" : "validity bad"));
  const result = el("textarea", null, "result");
  result.rows = 2;
  result.placeholder = "The tool's result";
  const send = el("button", "Send result", "send-result");
  send.type = "button";
  const answer = () => {
    state.messages.push({ role: "tool", tool_call_id: call.id, content: result.value });
    card.append(el("div", "Result: " + result.value, "result-sent"));
    for (const node of card.querySelectorAll(".result, button, .approval")) node.remove();
    const answered = new Set(state.messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id));
    if (turn.tool_calls.every((c) => answered.has(c.id))) ask();
  };
  send.addEventListener("click", answer);
  card.append(result, send);
  const offer = (turn.approvals || {})[call.id];
  if (offer) card.append(approval(call, offer, result, answer));
  return card;
}

// An MCP server's tool runs only once the person approves this call, with these arguments: the server runs the
// call it recorded when the model made it (its id and approval), once, and refuses other arguments.
function approval(call, offer, result, answer) {
  const box = el("div", null, "approval");
  box.append(el("span", `Run ${call.function.name} through its MCP server with these arguments?`));
  const approve = el("button", "Approve and run", "approve");
  const decline = el("button", "Decline", "decline");
  approve.type = decline.type = "button";
  approve.addEventListener("click", async () => {
    approve.disabled = decline.disabled = true;
    try {
      let args = {};
      try { args = JSON.parse(call.function.arguments || "{}"); } catch (e) { /* the server says what is wrong */ }
      const ran = await post("/playground/api/run", { call_id: offer.call_id, approval: offer.approval,
                                                        name: call.function.name, arguments: args });
      result.value = ran.result;
      answer();
    } catch (e) {
      box.replaceChildren(el("span", "The tool failed: " + e.message, "error"));
    }
  });
  decline.addEventListener("click", () => {
    // The server forgets the call, so it can no longer run; the page goes on whatever it answers.
    post("/playground/api/decline", { call_id: offer.call_id, approval: offer.approval }).catch(() => {});
    box.replaceChildren(el("span", "Not run: type a result, or send this one.", "muted"));
    result.value = "The user declined to run this tool call; it was not run.";
  });
  box.append(approve, decline);
  return box;
}

function bubble(role) {
  const item = el("li", null, "message " + role);
  item.append(el("div", role === "user" ? "You" : role === "tool" ? "Tool" : "Hammer", "who"));
  const text = el("div", "", "text");
  item.append(text);
  $("chat").append(item);
  return { item, text };
}

async function ask() {
  if (state.busy) return;
  state.busy = true;
  $("send").disabled = true;
  show("chat-error", "");
  const body = requestBody();
  const shown = bubble("assistant");
  const started = performance.now();
  let first = null;
  const calls = [];
  const approvals = {};
  let content = "", refusal = "", usage = null, finish = null;
  try {
    const reply = await fetch("/playground/api/chat", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (!reply.ok) throw new Error(await errorOf(reply));
    const reader = reply.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const lines = buffer.split("\n");
      buffer = lines.pop();
      for (const line of lines) {
        if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
        const chunk = JSON.parse(line.slice(6));
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.usage) usage = chunk.usage;
        for (const offer of chunk.hammer_approvals || []) approvals[offer.call_id] = offer;
        for (const choice of chunk.choices || []) {
          const delta = choice.delta || {};
          if (first === null && (delta.content || delta.tool_calls || delta.refusal)) first = performance.now();
          if (delta.content) { content += delta.content; shown.text.textContent = content; }
          if (delta.refusal) refusal += delta.refusal;
          for (const part of delta.tool_calls || []) {
            const call = calls[part.index] || (calls[part.index] = { id: "", type: "function",
                                                                     function: { name: "", arguments: "" } });
            if (part.id) call.id = part.id;
            if (part.function && part.function.name) call.function.name += part.function.name;
            if (part.function && part.function.arguments) call.function.arguments += part.function.arguments;
          }
          if (choice.finish_reason) finish = choice.finish_reason;
        }
      }
    }
    const ended = performance.now();
    const turn = { role: "assistant", content: content || null };
    if (calls.length) turn.tool_calls = calls;
    state.messages.push(turn);
    Object.defineProperty(turn, "approvals", { value: approvals });  // the page's alone: not sent back in messages
    if (refusal) {
      shown.item.classList.add("refusal");
      shown.item.querySelector(".who").textContent = "Hammer refused (no tool fits: it answered [])";
      shown.text.textContent = content || refusal;
    }
    for (const call of calls) shown.item.append(callCard(call, turn));
    if (!content && !calls.length && !refusal) shown.text.textContent = "(empty answer, finish: " + finish + ")";
    // Calls arrive whole once generated, so the rate is over the whole request (prompt evaluation included).
    metrics({ ttft: first === null ? null : (first - started) / 1000, seconds: (ended - started) / 1000, usage, finish });
    await inspect(body);
  } catch (e) {
    shown.item.remove();
    show("chat-error", e.message);
  } finally {
    state.busy = false;
    $("send").disabled = false;
  }
}

function metrics(m) {
  const list = $("metrics");
  list.replaceChildren();
  const rows = [["finish", m.finish], ["time to first token", m.ttft === null ? "-" : m.ttft.toFixed(2) + " s"]];
  if (m.usage) {
    const cached = m.usage.prompt_tokens_details && m.usage.prompt_tokens_details.cached_tokens;
    rows.push(["prompt tokens", m.usage.prompt_tokens], ["completion tokens", m.usage.completion_tokens],
              ["completion tokens per second of the request",
               m.seconds > 0 ? (m.usage.completion_tokens / m.seconds).toFixed(1) : "-"],
              ["prompt tokens from the cache", cached === undefined || cached === null ? "-" : cached]);
  }
  for (const [name, value] of rows) list.append(el("dt", name), el("dd", value));
}

async function inspect(body) {
  const question = Object.assign({}, body, { stream: false });
  delete question.stream_options;
  question.messages = state.messages.slice(0, -1);  // the request the last answer was given to
  showView(await post("/playground/api/inspect", question));
}

function showView(view) {
  $("prompt").textContent = view.prompt;
  const offered = $("offered");
  offered.replaceChildren();
  for (const name of view.offered_tools) {
    const shownName = view.shown_names[name];
    offered.append(el("li", shownName === name ? name : `${name} → shown as ${shownName}`));
  }
  if (!view.offered_tools.length) offered.append(el("li", "none", "muted"));
}

// ------------------------------------------------------------------ slot filling: one snapshot per user turn
function snapshotCard(snapshot) {
  const card = el("div", null, "snapshot");
  card.append(el("div", `Snapshot, turn ${snapshot.turn}: ${snapshot.function || "no function"} (${snapshot.state})`,
                 "snapshot-head"));
  const changed = Object.fromEntries((snapshot.changed || []).map((c) => [c.name, c]));
  const table = el("table", null, "slots");
  const rows = Object.entries(snapshot.arguments || {}).map(([name, value]) => [name, JSON.stringify(value),
    changed[name] ? "changed from " + JSON.stringify(changed[name].old) : (snapshot.added || []).includes(name) ? "new"
      : (snapshot.carried || []).includes(name) ? "carried" : "filled"]);
  for (const row of rows) {
    if ((snapshot.ungrounded || []).includes(row[0])) row[2] += ", not said by the user";
  }
  for (const name of snapshot.missing_required || []) rows.push([name, "", "missing (required)"]);
  for (const name of snapshot.missing_optional || []) rows.push([name, "", "missing (optional)"]);
  for (const [name, value, status] of rows) {
    const row = el("tr", null, "slot " + status.split(" ")[0]);
    row.append(el("td", name), el("td", value), el("td", status));
    table.append(row);
  }
  card.append(table);
  return card;
}

async function slotTurn() {
  state.busy = true;
  $("send").disabled = true;
  show("chat-error", "");
  const shown = bubble("assistant");
  try {
    const turn = await post("/playground/api/slot_filling", { history: state.slotHistory, tools: enabledTools(),
                                                             grounding: $("grounding").checked ? "enforce" : "report" });
    state.slotHistory.push(turn.message);
    shown.text.textContent = turn.text || (turn.action === "execute" ? "" : "(" + turn.action + ")");
    if (turn.snapshot) shown.item.append(snapshotCard(turn.snapshot));
    for (const call of turn.calls) {
      const card = el("div", null, "call");
      card.append(el("div", call.name, "call-name"), el("pre", JSON.stringify(call.arguments, null, 1), "call-args"),
                  el("div", "complete: ready to run", "validity ok"));
      shown.item.append(card);
    }
    if (turn.view) showView(turn.view);
    const list = $("metrics");
    list.replaceChildren();
    for (const [name, value] of [["decision", turn.action], ["state", turn.snapshot ? turn.snapshot.state : "-"],
                                 ["prompt tokens", turn.usage.prompt_tokens],
                                 ["completion tokens", turn.usage.completion_tokens]]) {
      list.append(el("dt", name), el("dd", value));
    }
  } catch (e) {
    shown.item.remove();
    state.slotHistory.pop();  // the user's turn goes back into the box: nothing typed is lost
    $("question").value = state.lastQuestion;
    show("chat-error", e.message);
  } finally {
    state.busy = false;
    $("send").disabled = false;
  }
}

function send(event) {
  event.preventDefault();
  const text = $("question").value.trim();
  if (!text || state.busy) return;
  bubble("user").text.textContent = text;
  $("question").value = "";
  state.lastQuestion = text;
  if ($("slot-mode").checked) {
    state.slotHistory.push({ role: "user", content: text });
    slotTurn();
    return;
  }
  state.messages.push({ role: "user", content: text });
  ask();
}

// ------------------------------------------------------------------ start
async function start() {
  $("key").value = state.key;
  $("key").addEventListener("change", () => {
    state.key = $("key").value;
    sessionStorage.setItem("hammer-key", state.key);
    start();
  });
  $("token").value = state.token;
  $("token").addEventListener("change", () => {
    state.token = $("token").value.trim();
    sessionStorage.setItem("hammer-playground-token", state.token);
    start();
  });
  $("add-demo").addEventListener("click", () => addTools(state.demo));
  $("add-pasted").addEventListener("click", async () => {
    let parsed;
    try { parsed = JSON.parse($("paste").value); } catch (e) {
      show("tools-error", "The pasted text is not JSON: " + e.message);
      return;
    }
    if (await addTools(parsed)) $("paste").value = "";
  });
  $("tools-file").addEventListener("change", async () => {
    const file = $("tools-file").files[0];
    if (!file) return;
    try { await addTools(JSON.parse(await file.text())); } catch (e) {
      show("tools-error", `${file.name} is not a JSON tools file: ${e.message}`);
    }
  });
  $("ask").addEventListener("submit", send);
  $("clear").addEventListener("click", () => {
    state.messages = [];
    state.slotHistory = [];
    $("chat").replaceChildren();
  });
  try {
    const reply = await fetch("/playground/api/config", { headers: headers() });
    if (!reply.ok) { show("tools-error", await errorOf(reply)); return; }
    const config = await reply.json();
    show("tools-error", "");
    state.model = config.model;
    state.demo = config.demo_tools;
    $("model").textContent = "model: " + config.model;
    await setTools(state.tools.length ? state.tools : config.tools, config.tools.map(nameOf));
    if (config.errors && config.errors.length) show("tools-error", config.errors.join("\n"));
    $("add-demo").disabled = false;  // once the tools given on the command line are in: nothing races them
  } catch (e) {
    show("tools-error", e.message);
  }
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
