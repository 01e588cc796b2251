// An ACP client built on the official TypeScript SDK (@agentclientprotocol/sdk 2.x), for the
// conformance suite. It starts the agent, runs one scenario and prints JSON lines to stdout:
//
//   {"type":"frame","sender":"client"|"agent","line":"<the raw JSON-RPC line>"}  every frame, both ways
//   {"type":"step","step":NAME,"detail":{...}}                                   each step that passed
//   {"type":"fail","step":NAME,"reason":"..."}                                   the step that failed
//   {"type":"exit","code":N,"signal":S}                                          how the agent exited
//   {"type":"done"}                                                              the scenario passed
//
// It exits 0 when the scenario passed, 1 when it failed, 2 when it could not run at all.
//
// usage: node ts_client.mjs SCENARIO --sdk PREFIX --cwd DIR [--answer ANSWER] -- AGENT_COMMAND [ARGS...]
//   SCENARIO  "core"   initialize, session/new, a prompt, a cancel racing its prompt, session/load
//             "skills" the demo agent with the conformance suite's scripted model: a skill loaded
//                      by the model, one of its files read through fs/read_text_file, a /slash
//                      command, a cancel in the middle of a model request, _skills/list,
//                      session/load with the replay
//             "trust"  the trust question of a project's skills (the agent under ACP_SKILLS_TRUST=ask):
//                      the skills before, the tool_call and session/request_permission delivered by
//                      the SDK, the final status, the skills after, and a second session
//             "cancel" the trust question held open (never answered) while the turn is cancelled:
//                      the stop reason, the card's final status, the skills after, a second turn,
//                      and whether the agent withdrew the question ($/cancel_request, which the
//                      SDK hands the handler as its signal's abort)
//   ANSWER    (--answer) how requestPermission answers: an option id, "cancelled", or "hold"
//             (never answers; the request's abort ends the wait). "hold" is the cancel
//             scenario's default, "cancelled" every other's
//   PREFIX    the npm prefix the SDK was installed into (its node_modules holds the package)
//   DIR       the absolute working directory for sessions

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const WAIT_MS = 20000;

function emit(record) {
  process.stdout.write(JSON.stringify(record) + "\n");
}

function parseArgs(argv) {
  const split = argv.indexOf("--");
  if (split < 0 || split === argv.length - 1) throw new Error("missing -- AGENT_COMMAND");
  const [scenario, ...options] = argv.slice(0, split);
  const named = {};
  for (let i = 0; i < options.length; i += 2) named[options[i]] = options[i + 1];
  if (!Object.hasOwn(SCENARIOS, scenario)) throw new Error(`unknown scenario ${scenario}`);
  if (!named["--sdk"] || !named["--cwd"]) throw new Error("--sdk and --cwd are required");
  const answer = named["--answer"] ?? (scenario === "cancel" ? "hold" : "cancelled");
  if (!ANSWERS.includes(answer)) throw new Error(`unknown answer ${answer}`);
  return { scenario, answer, sdk: named["--sdk"], cwd: named["--cwd"], command: argv.slice(split + 1) };
}

async function loadSdk(prefix) {
  const require = createRequire(join(resolve(prefix), "package.json"));
  return import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);
}

class StepFailed extends Error {
  constructor(step, reason) {
    super(`${step}: ${reason}`);
    this.step = step;
    this.reason = reason;
  }
}

function check(step, condition, reason, detail) {
  if (!condition) {
    throw new StepFailed(step, `${reason}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
  }
}

// Splits a byte stream into lines and reports each non-empty one.
function lineTap(sender) {
  const decoder = new TextDecoder();
  let buffer = "";
  return (chunk) => {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 1);
      if (line) emit({ type: "frame", sender, line });
    }
  };
}

// The child's stdio as web streams, recording every line in both directions. Writes made in the
// same turn of the event loop go out in one write, so a request and the notification sent right
// behind it (a prompt and its cancel) reach the agent together.
function childStreams(child) {
  const tapIn = lineTap("agent");
  const tapOut = lineTap("client");
  // Every line is recorded, even after the SDK stopped reading (the connection closed).
  let reading = true;
  const input = new ReadableStream({
    start(controller) {
      child.stdout.on("data", (chunk) => {
        tapIn(chunk);
        if (reading) controller.enqueue(new Uint8Array(chunk));
      });
      child.stdout.on("end", () => reading && controller.close());
      child.stdout.on("error", (error) => reading && controller.error(error));
    },
    cancel() {
      reading = false;
    },
  });
  let pending = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const data = Buffer.concat(pending);
    pending = [];
    tapOut(data);
    if (!child.stdin.writableEnded) child.stdin.write(data);
  };
  const output = new WritableStream({
    write(chunk) {
      pending.push(Buffer.from(chunk));
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    close() {
      end();
    },
  });
  const end = () => {
    flush();
    if (!child.stdin.writableEnded) child.stdin.end();
  };
  return { input, output, end };
}

// Collects session/update notifications; `until` resolves once a predicate holds.
class Updates {
  constructor() {
    this.all = [];
    this.reads = [];
    this.questions = [];
    this.withdrawn = []; // the tool call ids of questions the agent withdrew
    this.waiters = [];
  }
  add(params) {
    this.all.push(params);
    this.changed();
  }
  changed() {
    this.waiters = this.waiters.filter((w) => !w.test());
  }
  for(sessionId, since = 0) {
    return this.all.slice(since).filter((p) => p.sessionId === sessionId).map((p) => p.update);
  }
  until(step, predicate) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new StepFailed(step, "timed out waiting for an update")), WAIT_MS);
      const waiter = {
        test: () => {
          if (!predicate()) return false;
          clearTimeout(timer);
          resolve();
          return true;
        },
      };
      if (!waiter.test()) this.waiters.push(waiter);
    });
  }
}

const text = (value) => [{ type: "text", text: value }];
const STOP_REASONS = ["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"];

async function core(acp, agent, updates, cwd) {
  const init = await initialize(acp, agent);
  const { sessionId } = await newSession(acp, agent, cwd);
  const first = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text("hello") });
  check("prompt", STOP_REASONS.includes(first.stopReason), "unknown stop reason", first);
  emit({ type: "step", step: "prompt", detail: first });

  // The cancel goes out in the same write as its prompt.
  const racing = agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text("hello again") });
  await agent.notify(acp.methods.agent.session.cancel, { sessionId });
  const cancelled = await racing;
  check("cancel", cancelled.stopReason === "cancelled", "a cancelled turn must stop with cancelled", cancelled);
  emit({ type: "step", step: "cancel", detail: cancelled });

  if (init.agentCapabilities?.loadSession === true) {
    const loaded = await agent.request(acp.methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
    emit({ type: "step", step: "session/load", detail: loaded ?? null });
  }
}

async function initialize(acp, agent, readTextFile = false) {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile, writeTextFile: false }, terminal: false },
    clientInfo: { name: "acp-conformance-ts", version: "1.0.0" },
  });
  check("initialize", init.protocolVersion === 1, "protocol version 1 expected", init);
  emit({ type: "step", step: "initialize", detail: init });
  return init;
}

async function newSession(acp, agent, cwd) {
  const created = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  check("session/new", typeof created.sessionId === "string" && created.sessionId, "no sessionId", created);
  emit({ type: "step", step: "session/new", detail: created });
  return created;
}

function toolCalls(list, title) {
  const start = list.find((u) => u.sessionUpdate === "tool_call" && u.title === title);
  const end = start && list.find((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === start.toolCallId);
  return { start, end };
}

function agentText(list) {
  return list.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
}

async function skills(acp, agent, updates, cwd) {
  const init = await initialize(acp, agent, true);
  const meta = init.agentCapabilities?._meta?.["acp-skills"];
  check("initialize", init.agentCapabilities?.loadSession === true, "loadSession expected", init);
  check("initialize", meta?.methods?.includes("_skills/list"), "acp-skills capability expected", init);
  const { sessionId } = await newSession(acp, agent, cwd);
  await updates.until("session/new", () =>
    updates.for(sessionId).some((u) => u.sessionUpdate === "available_commands_update"),
  );
  const commands = updates.for(sessionId).find((u) => u.sessionUpdate === "available_commands_update");
  const names = commands.availableCommands.map((c) => c.name);
  check("commands", names.includes("code-review") && names.includes("commit-message"), "slash commands", names);
  check("commands", !names.includes("python-style"), "a skill that is not user-invocable is no command", names);
  emit({ type: "step", step: "commands", detail: names });

  let mark = updates.all.length;
  const loaded = await agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: text("Please load skill code-review"),
  });
  check("skill load", loaded.stopReason === "end_turn", "end_turn expected", loaded);
  const load = toolCalls(updates.for(sessionId, mark), "Load skill code-review");
  check("skill load", load.start?.kind === "read" && load.start.status === "in_progress", "tool_call", load.start);
  check("skill load", load.end?.status === "completed", "tool_call_update completed", load.end);
  check("skill load", load.end.content[0].content.text.includes("<skill_content"), "skill text", load.end);
  check("skill load", agentText(updates.for(sessionId, mark)).startsWith("Done: read"), "model reply");
  emit({ type: "step", step: "skill load", detail: { stopReason: loaded.stopReason, toolCallId: load.start.toolCallId } });

  mark = updates.all.length;
  const resource = "Please load skill code-review file references/checklist.md";
  const read = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text(resource) });
  check("resource", read.stopReason === "end_turn", "end_turn expected", read);
  check("resource", updates.reads.length === 1 && updates.reads[0].endsWith("checklist.md"), "one read", updates.reads);
  const viaClient = toolCalls(updates.for(sessionId, mark), "Load skill code-review").end;
  const expected = `client copy of ${updates.reads[0]}`;
  check("resource", viaClient?.content?.[0]?.content?.text === expected, "read through the client", viaClient);
  emit({ type: "step", step: "resource", detail: { path: updates.reads[0] } });

  mark = updates.all.length;
  const slash = await agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: text("/commit-message tidy up the parser"),
  });
  check("slash command", slash.stopReason === "end_turn", "end_turn expected", slash);
  const invoked = toolCalls(updates.for(sessionId, mark), "Load skill commit-message");
  check("slash command", invoked.end?.status === "completed", "the invoked skill is reported", invoked);
  const reply = agentText(updates.for(sessionId, mark));
  check("slash command", reply === "Following the commit-message skill.", "the model saw the skill", reply);
  emit({ type: "step", step: "slash command", detail: slash });

  mark = updates.all.length;
  const slow = agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text("[slow] take your time") });
  await updates.until("cancel", () => agentText(updates.for(sessionId, mark)).includes("thinking slowly"));
  await agent.notify(acp.methods.agent.session.cancel, { sessionId });
  const cancelled = await slow;
  check("cancel", cancelled.stopReason === "cancelled", "a cancelled turn must stop with cancelled", cancelled);
  emit({ type: "step", step: "cancel", detail: cancelled });

  const listed = await agent.request("_skills/list", { sessionId });
  const listedNames = listed.skills.map((s) => s.name);
  check("_skills/list", listedNames.includes("python-style"), "every skill is listed", listedNames);
  emit({ type: "step", step: "_skills/list", detail: listedNames });

  mark = updates.all.length;
  const reloaded = await agent.request(acp.methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
  const replay = updates.for(sessionId, mark);
  const users = replay.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text);
  check("session/load", users[0] === "Please load skill code-review", "the first turn is replayed", users);
  check("session/load", users[1] === resource, "the second turn", users);
  check("session/load", users[2] === "/commit-message tidy up the parser", "the slash command", users);
  check("session/load", toolCalls(replay, "Load skill code-review").end?.status === "completed", "tool calls", replay);
  await updates.until("session/load", () =>
    updates.for(sessionId, mark).some((u) => u.sessionUpdate === "available_commands_update"),
  );
  emit({ type: "step", step: "session/load", detail: { result: reloaded ?? null, replayed: replay.length } });

  const after = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text("and now?") });
  check("after load", after.stopReason === "end_turn", "the loaded session takes prompts", after);
  emit({ type: "step", step: "after load", detail: after });
}

// Every skill's trust as `_skills/list` reports it, by name.
async function skillTrust(agent, sessionId) {
  const listed = await agent.request("_skills/list", { sessionId });
  return Object.fromEntries(listed.skills.map((s) => [s.name, s.trust]));
}

function commandNames(list) {
  const sent = list.filter((u) => u.sessionUpdate === "available_commands_update");
  return sent.length ? sent[sent.length - 1].availableCommands.map((c) => c.name) : null;
}

// One session in the project: the skills before, one prompt (which may ask), the skills after.
async function trustSession(acp, agent, updates, cwd, step) {
  const { sessionId } = await newSession(acp, agent, cwd);
  await updates.until(step, () => commandNames(updates.for(sessionId)) !== null);
  const before = { commands: commandNames(updates.for(sessionId)), skills: await skillTrust(agent, sessionId) };
  const mark = updates.all.length;
  const asked = updates.questions.length;
  const done = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text("hello") });
  check(step, done.stopReason === "end_turn", "the turn ends properly whatever the answer", done);
  const questions = updates.questions.slice(asked);
  check(step, questions.length <= 1, "one question per turn at most", questions);
  const turn = updates.for(sessionId, mark);
  const callId = questions[0]?.toolCall?.toolCallId;
  const toolCall = turn.find((u) => u.sessionUpdate === "tool_call" && u.toolCallId === callId);
  check(step, questions.length === 0 || toolCall, "the question's tool_call is reported", turn);
  const ends = turn.filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === callId);
  const after = { commands: commandNames(turn), skills: await skillTrust(agent, sessionId) };
  const detail = { before, question: questions[0] ?? null, toolCall: toolCall ?? null, after };
  emit({ type: "step", step, detail: { ...detail, finalStatus: ends.at(-1)?.status ?? null } });
}

async function trust(acp, agent, updates, cwd) {
  await initialize(acp, agent);
  await trustSession(acp, agent, updates, cwd, "first session");
  await trustSession(acp, agent, updates, cwd, "second session");
}

// The question held open while the turn is cancelled: that counts as "Not now".
async function cancel(acp, agent, updates, cwd) {
  await initialize(acp, agent);
  const { sessionId } = await newSession(acp, agent, cwd);
  await updates.until("session/new", () => commandNames(updates.for(sessionId)) !== null);
  const mark = updates.all.length;
  const turn = agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text("hello") });
  await updates.until("question", () => updates.questions.length === 1);
  const callId = updates.questions[0].toolCall.toolCallId;
  emit({ type: "step", step: "question", detail: { toolCallId: callId } });

  await agent.notify(acp.methods.agent.session.cancel, { sessionId });
  const cancelled = await turn;
  check("cancel", cancelled.stopReason === "cancelled", "a cancelled turn must stop with cancelled", cancelled);
  const ends = updates.for(sessionId, mark).filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === callId);
  check("cancel", ends.at(-1)?.status === "failed", "the question's card ends failed", ends);
  emit({ type: "step", step: "cancel", detail: cancelled });

  const skills = await skillTrust(agent, sessionId);
  const again = await agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: text("hello again") });
  check("after cancel", again.stopReason === "end_turn", "the next turn ends properly", again);
  check("after cancel", updates.questions.length === 1, "the session does not ask again", updates.questions);
  emit({ type: "step", step: "after cancel", detail: { skills, withdrawn: [...updates.withdrawn] } });
}

const SCENARIOS = { core, skills, trust, cancel };
const ANSWERS = ["allow_once", "allow_always", "reject_once", "reject_always", "cancelled", "hold"];

async function main() {
  let options;
  let acp;
  try {
    options = parseArgs(process.argv.slice(2));
    acp = await loadSdk(options.sdk);
  } catch (error) {
    emit({ type: "fail", step: "setup", reason: String(error?.stack ?? error) });
    return 2;
  }
  const [command, ...args] = options.command;
  // The agent starts in node's own working directory; DIR is only where sessions work.
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  child.on("error", (error) => emit({ type: "fail", step: "spawn", reason: String(error) }));
  const { input, output, end } = childStreams(child);
  const updates = new Updates();
  const app = acp
    .client({ name: "acp-conformance-ts" })
    .onNotification(acp.methods.client.session.update, ({ params }) => updates.add(params))
    .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
      updates.reads.push(params.path);
      return { content: `client copy of ${params.path}` };
    })
    // The SDK parses the request with its schema before this runs: a malformed one never arrives.
    .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => {
      updates.questions.push(params);
      updates.changed();
      if (options.answer === "hold") {
        // Held until the agent withdraws it: the SDK aborts the signal at `$/cancel_request`.
        return new Promise((_, reject) =>
          signal.addEventListener(
            "abort",
            () => {
              updates.withdrawn.push(params.toolCall.toolCallId);
              reject(signal.reason);
            },
            { once: true },
          ),
        );
      }
      if (options.answer === "cancelled") return { outcome: { outcome: "cancelled" } };
      return { outcome: { outcome: "selected", optionId: options.answer } };
    });
  const scenario = SCENARIOS[options.scenario];
  let failed = false;
  try {
    await app.connectWith(acp.ndJsonStream(output, input), (agent) =>
      scenario(acp, agent, updates, options.cwd),
    );
  } catch (error) {
    failed = true;
    if (error instanceof StepFailed) emit({ type: "fail", step: error.step, reason: error.reason });
    else emit({ type: "fail", step: "protocol", reason: String(error?.stack ?? error) });
  }
  end();
  const timer = setTimeout(() => child.kill("SIGKILL"), 10000);
  const { code, signal } = await exited;
  clearTimeout(timer);
  emit({ type: "exit", code, signal });
  if (code !== 0) {
    emit({ type: "fail", step: "exit", reason: `the agent exited with ${code ?? signal} at the end of input` });
    failed = true;
  }
  if (!failed) emit({ type: "done" });
  return failed ? 1 : 0;
}

process.exitCode = await main();
