// The Hammer playground: tools on and off, a streamed chat through /playground/api/chat (Chat Completions), call
// cards, and what the model read for each answer (the record the answer carries, pass by pass: never the request
// planned again). Every name and text from tools, results and the model is put in the page as text (textContent),
// never as markup; the Content-Security-Policy forbids inline code besides. Every helper request carries the
// server's per-start token, which the address hammer printed holds (#token=...: a fragment, never sent to the
// server); the page keeps it in this tab's session storage, which a page of another origin cannot read.
//
// The conversation (state.messages) changes only when an answer has come whole: a send that fails or is stopped
// leaves it as it was and puts the question back in the box. A call card answers its own call, by its id; the cards
// of an earlier turn close when a later turn starts.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_HEADER = "x-hammer-playground-token";
const state = { model: "hammer", tools: [], enabled: new Set(), costs: {}, messages: [], slotHistory: [], busy: false,
                demo: [], window: 0, budget: 0, key: sessionStorage.getItem("hammer-key") || "",
                token: takeToken(), cards: [], controller: null, passes: [] };

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

function button(text, cls, onClick) {
  const node = el("button", text, cls);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

function headers() {
  const h = { "content-type": "application/json" };
  if (state.key) h.authorization = "Bearer " + state.key;
  if (state.token) h[TOKEN_HEADER] = state.token;
  return h;
}

// A failed reply's message; a missing or wrong key, or a missing token, is asked for.
async function errorOf(reply) {
  let body = null;
  try { body = await reply.json(); } catch (e) { /* not JSON: the status says it */ }
  const error = body && body.error;
  const message = (error && (error.message || error)) || reply.status + " " + reply.statusText;
  if (reply.status === 401) {
    askFor("key");
    return state.key ? "The server refused this API key (" + message + "). Type the key the server was started " +
                       "with (--api-key, or $HAMMER_SERVER_API_KEY) in the API key box."
      : "This server needs an API key (" + message + "). Type it in the API key box.";
  }
  if (error && error.code === "playground_token_required") askFor("token");
  return message;
}

// fetch, with a server that cannot be reached said as such (the browser's own words are "Failed to fetch").
async function reach(path, options) {
  try {
    return await fetch(path, options);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new Error("Could not reach the server at " + location.origin + ": is hammer still running? Nothing was " +
                    "sent to the model, and what you typed is kept.");
  }
}

async function post(path, body) {
  const reply = await reach(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
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

// The tools the search shows: a name or a description holding the searched text (any case).
function shownTools() {
  const wanted = $("tool-search").value.trim().toLowerCase();
  if (!wanted) return state.tools;
  return state.tools.filter((t) => nameOf(t).toLowerCase().includes(wanted) ||
                                   (t.function.description || "").toLowerCase().includes(wanted));
}

function removeTool(name) {
  state.tools = state.tools.filter((t) => nameOf(t) !== name);
  state.enabled.delete(name);
  delete state.costs[name];
  renderTools();
}

function renderTools() {
  const list = $("tools");
  list.replaceChildren();
  let total = 0;
  for (const tool of state.tools) if (state.enabled.has(nameOf(tool))) total += state.costs[nameOf(tool)] || 0;
  for (const tool of shownTools()) {
    const name = nameOf(tool);
    const cost = state.costs[name] || 0;
    const item = el("li", null, "tool");
    const label = el("label");
    const box = el("input");
    box.type = "checkbox";
    box.checked = state.enabled.has(name);
    box.dataset.tool = name;
    box.addEventListener("change", () => {
      if (box.checked) state.enabled.add(name); else state.enabled.delete(name);
      renderTools();
    });
    label.append(box, el("span", name, "tool-name"));
    const remove = button("×", "remove-tool", () => removeTool(name));
    remove.dataset.tool = name;
    remove.title = remove.ariaLabel = "Remove " + name;
    const bar = el("span", null, "bar");
    const fill = el("span", null, "fill");
    fill.style.width = state.window ? Math.min(100, (100 * cost) / state.window).toFixed(1) + "%" : "0";
    bar.append(fill);
    item.append(remove, label, el("span", "≈" + cost + " tokens", "cost"), bar,
                el("div", tool.function.description || "", "description"));
    list.append(item);
  }
  const hidden = state.tools.length - list.children.length;
  const budget = state.budget ? ` (tool budget ${state.budget}: a larger set is narrowed per question)` : "";
  $("budget").textContent = `On: ${state.enabled.size} of ${state.tools.length} tools, ≈${total} tokens of a ` +
                            `${state.window}-token context${budget}` + (hidden ? `; ${hidden} hidden by the search` : "");
  const choice = $("tool-choice");
  const current = choice.value;
  choice.replaceChildren(...["auto", "required", "none"].map((v) => el("option", v)));
  for (const name of state.enabled) choice.append(el("option", name));
  choice.value = [...choice.options].some((o) => o.value === current) ? current : "auto";
}

function switchShown(on) {
  for (const tool of shownTools()) {
    if (on) state.enabled.add(nameOf(tool)); else state.enabled.delete(nameOf(tool));
  }
  renderTools();
}

// ------------------------------------------------------------------ chat
function enabledTools() { return state.tools.filter((t) => state.enabled.has(nameOf(t))); }

function requestBody(messages) {
  const tools = enabledTools();
  const choice = $("tool-choice").value;
  const body = { model: state.model, messages, stream: true, stream_options: { include_usage: true },
                 mask_names: $("mask").checked, constrained: $("constrained").checked,
                 relevance_gate: $("gate").checked,
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

// A card for one call of an answer: its result is typed (or its MCP tool run) for this call, by its id, and only
// while the card is open. The answer is sent once every call of the turn has its result.
function callCard(call, turn) {
  const card = { call, turn, result: null, closed: false, node: el("div", null, "call") };
  const node = card.node;
  node.dataset.call = call.id;
  node.append(el("div", call.function.name, "call-name"));
  let pretty = call.function.arguments;
  try { pretty = JSON.stringify(JSON.parse(pretty), null, 1); } catch (e) { /* shown as written */ }
  node.append(el("pre", pretty, "call-args"));
  const verdict = valid(call);
  node.append(el("div", verdict, verdict === "valid" ? "validity ok" : "validity bad"));
  const open = el("div", null, "open");
  const result = el("textarea", null, "result");
  result.rows = 2;
  result.placeholder = "The tool's result";
  const answer = () => {
    if (card.closed || card.result !== null) return;
    card.result = result.value;
    open.hidden = true;
    card.sent = el("div", "Result: " + result.value, "result-sent");
    node.append(card.sent);
    if (turn.cards.every((c) => c.result !== null)) sendResults(turn);
  };
  open.append(result, button("Send result", "send-result", answer));
  const offer = (turn.approvals || {})[call.id];
  if (offer) open.append(approval(call, offer, result, answer, card));
  node.append(open, copyBar(call, turn.body));
  card.reopen = () => {  // the results were not sent (an error, or Stop): typed again, or sent again
    card.result = null;
    if (card.sent) card.sent.remove();
    open.hidden = false;
  };
  // Closed when a later turn starts; opened again if that turn's request fails; forgotten once it is answered
  // (the server forgets an MCP call that was never approved, so it can no longer run).
  const note = el("div", null, "muted closed-note");
  card.close = (why) => {
    card.closed = true;
    open.hidden = true;
    node.classList.add("closed");
    note.textContent = why;
    node.append(note);
  };
  card.unclose = () => {
    card.closed = false;
    open.hidden = false;
    node.classList.remove("closed");
    note.remove();
  };
  card.forget = () => {
    if (offer) post("/playground/api/decline", { call_id: offer.call_id, approval: offer.approval }).catch(() => {});
  };
  return card;
}

// An MCP server's tool runs only once the person approves this call, with these arguments: the server runs the
// call it recorded when the model made it (its id and approval), once, and refuses other arguments.
function approval(call, offer, result, answer, card) {
  const box = el("div", null, "approval");
  box.append(el("span", `Run ${call.function.name} through its MCP server with these arguments?`));
  const approve = button("Approve and run", "approve", async () => {
    approve.disabled = decline.disabled = true;
    try {
      let args = {};
      try { args = JSON.parse(call.function.arguments || "{}"); } catch (e) { /* the server says what is wrong */ }
      const ran = await post("/playground/api/run", { call_id: offer.call_id, approval: offer.approval,
                                                        name: call.function.name, arguments: args });
      if (card.closed) return;
      result.value = ran.result;
      box.remove();
      answer();
    } catch (e) {
      box.replaceChildren(el("span", "The tool failed: " + e.message, "error"));
    }
  });
  const decline = button("Decline", "decline", () => {
    // The server forgets the call, so it can no longer run; the page goes on whatever it answers.
    post("/playground/api/decline", { call_id: offer.call_id, approval: offer.approval }).catch(() => {});
    box.replaceChildren(el("span", "Not run: type a result, or send this one.", "muted"));
    result.value = "The user declined to run this tool call; it was not run.";
  });
  box.append(approve, decline);
  return box;
}

// The call as JSON, and the request that made it as Python (ChatHammer) and curl: shown as text, copied.
function copyBar(call, body) {
  const bar = el("div", null, "copy");
  const shown = el("pre", null, "snippet");
  shown.hidden = true;
  const forms = { JSON: () => callJson(call), Python: () => pythonSnippet(body),
                  curl: () => curlSnippet(body, Boolean(state.key)) };
  for (const [name, make] of Object.entries(forms)) {
    const copy = button("Copy as " + name, "copy-" + name.toLowerCase(), () => {
      shown.textContent = make();
      shown.hidden = false;
      shown.dataset.form = name;
      if (navigator.clipboard) navigator.clipboard.writeText(shown.textContent).catch(() => {});
    });
    bar.append(copy);
  }
  bar.append(shown);
  return bar;
}

function bubble(role) {
  const item = el("li", null, "message " + role);
  item.append(el("div", role === "user" ? "You" : role === "tool" ? "Tool" : "Hammer", "who"));
  const text = el("div", "", "text");
  item.append(text);
  $("chat").append(item);
  return { item, text };
}

function waitingCards() { return state.cards.filter((c) => !c.closed && c.result === null); }

// A later turn starts: the cards still open cannot answer its calls, so they close (and are returned).
function closeCards(why) {
  const closed = waitingCards();
  for (const card of closed) card.close(why);
  state.cards = [];
  return closed;
}

function sendResults(turn) {
  const results = turn.cards.map((c) => ({ role: "tool", tool_call_id: c.call.id, content: c.result }));
  ask(results, () => { for (const card of turn.cards) card.reopen(); }, () => {});
}

// Progress while an answer comes: a spinner, the seconds so far, and Stop (which ends the request: the server
// stops the generation when its client leaves).
function progress(on) {
  clearInterval(state.ticker);
  $("progress").hidden = !on;
  $("send").disabled = on;
  if (!on) return;
  const started = performance.now();
  const tick = () => { $("elapsed").textContent = `Answering… ${((performance.now() - started) / 1000).toFixed(1)} s`; };
  tick();
  state.ticker = setInterval(tick, 100);
}

// One request with the committed history plus `extra` (the user's question, or the results of a turn's calls).
// The history takes both only once the answer is whole (then `done` runs); else `undo` puts back what was typed.
async function ask(extra, undo, done) {
  if (state.busy) return;
  state.busy = true;
  show("chat-error", "");
  show("waiting-text", "");
  $("waiting").hidden = true;
  const body = requestBody(state.messages.concat(extra));
  const shown = bubble("assistant");
  state.controller = new AbortController();
  progress(true);
  const started = performance.now();
  let first = null;
  const calls = [];
  const approvals = {};
  let content = "", refusal = "", usage = null, finish = null, passes = [];
  try {
    const reply = await reach("/playground/api/chat", { method: "POST", headers: headers(), body: JSON.stringify(body),
                                                        signal: state.controller.signal });
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
        if (chunk.hammer_passes) passes = chunk.hammer_passes;
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
    state.messages.push(...extra, turn);  // the answer is whole: now, and only now, the history takes the turn
    done();
    // The page's own, not sent back in messages: the approvals, the request (for copy as code) and the cards.
    Object.defineProperties(turn, { approvals: { value: approvals }, body: { value: body },
                                    cards: { value: [], writable: true } });
    const gated = passes.some((p) => p.gated);
    if (refusal) {
      shown.item.classList.add("refusal");
      shown.item.querySelector(".who").textContent = gated
        ? "Refused by the relevance gate (no tool shares a word with the question; the model did not run)"
        : "Hammer refused (no tool fits: the model answered [])";
      shown.text.textContent = content || refusal;
    }
    turn.cards = calls.map((call) => callCard(call, turn));
    for (const card of turn.cards) shown.item.append(card.node);
    state.cards = turn.cards.slice();
    if (!content && !calls.length && !refusal) shown.text.textContent = "(empty answer, finish: " + finish + ")";
    if (finish === "length") {
      shown.item.append(el("div", `Cut at max tokens (${body.max_tokens}): the answer was not finished. Raise ` +
                                  "Max tokens in the settings for a longer one.", "cut"));
    }
    // Calls arrive whole once generated, so the rate is over the whole request (prompt evaluation included).
    metrics({ ttft: first === null ? null : (first - started) / 1000, seconds: (ended - started) / 1000, usage, finish });
    showPasses(passes);
  } catch (e) {
    shown.item.remove();
    undo();
    show("chat-error", e.name === "AbortError"
      ? "Stopped: the request was ended and the server stopped its generation. Nothing was added to the chat."
      : e.message);
  } finally {
    state.busy = false;
    state.controller = null;
    progress(false);
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

const STAGES = { tools: "tools pass: Hammer's prompt with the tools block, answered with a call list",
                 answer: "answer pass: a prompt without tools, answered in words" };

// What the model read for the last answer, pass by pass, as the engine ran it; the last pass is shown first.
function showPasses(passes) {
  state.passes = passes;
  const list = $("passes");
  list.replaceChildren();
  passes.forEach((done, index) => {
    const tokens = done.model_ran ? `${done.prompt_tokens} prompt tokens` : "the model did not run (0 prompt tokens)";
    const item = el("li", null, "pass");
    item.append(button(`Pass ${index + 1} of ${passes.length}: ${STAGES[done.stage] || done.stage}; ${tokens}`,
                       "pass-button", () => showPass(index)));
    list.append(item);
  });
  if (passes.length) showPass(passes.length - 1); else showView({ prompt: "", offered_tools: [], shown_names: {} });
}

function showPass(index) {
  const done = state.passes[index];
  for (const [i, item] of [...$("passes").children].entries()) item.classList.toggle("current", i === index);
  $("pass-note").textContent = done.gated
    ? "The relevance gate refused this question: no tool shares a word with it, so the model did not run. " +
      "This is the prompt it would have read; turn the gate off in the settings to let the model answer."
    : done.stage === "answer" && done.offered_tools.length === 0 ? "This pass offered no tools." : "";
  showView(done);
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
  // The engine counts turns from 0; a person counts from 1.
  card.append(el("div", `Snapshot, turn ${snapshot.turn + 1}: ${snapshot.function || "no function"} (${snapshot.state})`,
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

async function slotTurn(said, undo) {
  state.busy = true;
  progress(true);
  show("chat-error", "");
  const shown = bubble("assistant");
  try {
    const history = state.slotHistory.concat([said]);
    const turn = await post("/playground/api/slot_filling", { history, tools: enabledTools(),
                                                             grounding: $("grounding").checked ? "enforce" : "report",
                                                             relevance_gate: $("gate").checked });
    state.slotHistory.push(said, turn.message);  // only once the turn is whole
    shown.text.textContent = turn.text || (turn.action === "execute" ? "" : "(" + turn.action + ")");
    if (turn.snapshot) shown.item.append(snapshotCard(turn.snapshot));
    for (const call of turn.calls) {
      const card = el("div", null, "call");
      card.append(el("div", call.name, "call-name"), el("pre", JSON.stringify(call.arguments, null, 1), "call-args"),
                  el("div", "complete: ready to run", "validity ok"));
      shown.item.append(card);
    }
    showPasses(turn.passes);  // each snapshot call as it ran, never planned again
    const list = $("metrics");
    list.replaceChildren();
    for (const [name, value] of [["decision", turn.action], ["state", turn.snapshot ? turn.snapshot.state : "-"],
                                 ["prompt tokens", turn.usage.prompt_tokens],
                                 ["completion tokens", turn.usage.completion_tokens]]) {
      list.append(el("dt", name), el("dd", value));
    }
  } catch (e) {
    shown.item.remove();
    undo();
    show("chat-error", e.message);
  } finally {
    state.busy = false;
    progress(false);
  }
}

function send(event, anyway) {
  if (event) event.preventDefault();
  const text = $("question").value.trim();
  if (!text || state.busy) return;
  const waiting = $("slot-mode").checked ? [] : waitingCards();
  if (waiting.length && !anyway) {
    // A new question while calls wait for results: the person says what to do with them.
    show("waiting-text", `${waiting.length} call${waiting.length > 1 ? "s wait" : " waits"} for a result. Sending ` +
                         "closes them: they are left unanswered.");
    $("waiting").hidden = false;
    return;
  }
  const mine = bubble("user");
  mine.text.textContent = text;
  $("question").value = "";
  const undo = () => {  // nothing typed is lost: the question goes back in the box
    mine.item.remove();
    if (!$("question").value) $("question").value = text;
  };
  const said = { role: "user", content: text };
  if ($("slot-mode").checked) {
    slotTurn(said, undo);
    return;
  }
  const closed = closeCards("Closed: a later question was sent before this call had its result.");
  ask([said], () => {
    undo();
    for (const card of closed) card.unclose();
    state.cards = closed;
  }, () => { for (const card of closed) card.forget(); });
}

function newChat() {
  if (state.controller) state.controller.abort();
  for (const card of closeCards("Closed: a new chat was started.")) card.forget();
  state.messages = [];
  state.slotHistory = [];
  state.passes = [];
  $("chat").replaceChildren();
  for (const id of ["metrics", "passes", "offered"]) $(id).replaceChildren();
  for (const id of ["prompt", "pass-note"]) $(id).textContent = "";
  show("chat-error", "");
  $("waiting").hidden = true;
}

// ------------------------------------------------------------------ start
function describeModel(config) {
  const card = config.model_card || {};
  $("model").textContent = card.file && card.file !== config.model
    ? `model: ${card.file} (served as ${config.model})` : "model: " + config.model;
  show("model-note", card.stand_in ? "This is " + card.note : "");
  if (card.relevance_gate !== undefined && !state.gateSet) $("gate").checked = card.relevance_gate;
}

async function start() {
  try {
    const reply = await reach("/playground/api/config", { headers: headers() });
    if (!reply.ok) { show("tools-error", await errorOf(reply)); return; }
    const config = await reply.json();
    show("tools-error", "");
    state.model = config.model;
    state.demo = config.demo_tools;
    describeModel(config);
    await setTools(state.tools.length ? state.tools : config.tools, config.tools.map(nameOf));
    if (config.errors && config.errors.length) show("tools-error", config.errors.join("\n"));
    $("add-demo").disabled = false;  // once the tools given on the command line are in: nothing races them
  } catch (e) {
    show("tools-error", e.message);
  }
}

function wire() {
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
  $("tool-search").addEventListener("input", renderTools);
  $("all-on").addEventListener("click", () => switchShown(true));
  $("all-off").addEventListener("click", () => switchShown(false));
  $("gate").addEventListener("change", () => { state.gateSet = true; });
  $("ask").addEventListener("submit", (event) => send(event, false));
  $("question").addEventListener("keydown", (event) => {
    // Enter sends; Shift+Enter is a new line (and Enter while an input method composes a word is its own).
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) send(event, false);
  });
  $("send-anyway").addEventListener("click", () => send(null, true));
  $("keep-waiting").addEventListener("click", () => { $("waiting").hidden = true; });
  $("stop").addEventListener("click", () => { if (state.controller) state.controller.abort(); });
  $("clear").addEventListener("click", newChat);
  start();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire); else wire();
