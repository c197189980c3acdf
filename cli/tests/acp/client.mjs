// A real ACP client (the official TypeScript library) driving `palisade acp -- AGENT` as an
// editor would: initialize, one session, the prompts of the script, in order. It grants every
// permission it is asked for (so a tool that does not run was stopped by Palisade), serves
// fs/read_text_file and fs/write_text_file from and to disk, and prints one JSON report on
// stdout.
//
// argv: PALISADE_BIN PLUGINS_DIR CWD SCRIPT_JSON -- AGENT_COMMAND...
// SCRIPT_JSON: {"prompts": ["…", …], "cancelAfterMs": null, "auditLog": null, "server": null}
// With "server": {"command": …, "args": […]} (an editor's registration, as `palisade install
// zed` writes it), that is started instead of PALISADE_BIN acp … -- AGENT.
import { client, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import fs from "node:fs";

const [palisade, plugins, cwd, scriptJson, dashes, ...agent] = process.argv.slice(2);
if (dashes !== "--") throw new Error("usage: client.mjs PALISADE PLUGINS CWD SCRIPT -- AGENT…");
const script = JSON.parse(scriptJson);
const audit = script.auditLog ? ["--audit-log", script.auditLog] : [];
const [command, args] = script.server
  ? [script.server.command, script.server.args]
  : [palisade, ["acp", "--plugins", plugins, ...audit, "--", ...agent]];
const proxy = spawn(command, args, {
  stdio: ["pipe", "pipe", "pipe"],
  cwd,
});
let stderr = "";
proxy.stderr.on("data", (d) => (stderr += d));
const exited = new Promise((resolve) => proxy.on("exit", (code) => resolve(code)));
function record(turn, u) {
  if (u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text") {
    turn.updates.push(u.content.text);
  } else if (u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") {
    turn.updates.push(`${u.sessionUpdate}:${u.status ?? ""}:${u.title ?? ""}`);
  }
}
const report = { turns: [], permissions: [], reads: [], writes: [], error: null, exitCode: null };
const stream = ndJsonStream(Writable.toWeb(proxy.stdin), Readable.toWeb(proxy.stdout));
try {
  await client()
    .onRequest("session/request_permission", async (ctx) => {
      const params = ctx.params ?? ctx;
      report.permissions.push(params.toolCall?.title ?? "?");
      const allow = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onRequest("fs/read_text_file", async (ctx) => {
      const params = ctx.params ?? ctx;
      report.reads.push(params.path);
      return { content: fs.readFileSync(params.path, "utf8") };
    })
    .onRequest("fs/write_text_file", async (ctx) => {
      const params = ctx.params ?? ctx;
      report.writes.push({ path: params.path, content: params.content });
      fs.writeFileSync(params.path, params.content);
      return {};
    })
    .connectWith(stream, async (ctx) => {
      await ctx.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
      });
      const session = await ctx.buildSession(cwd).start();
      // A read of the session's updates that lost a race is kept for the next one.
      let reading = null;
      for (const text of script.prompts) {
        const turn = { prompt: text, updates: [], stopReason: null, error: null };
        report.turns.push(turn);
        const done = session.prompt(text).then(
          (response) => ({ kind: "done", response }),
          (e) => ({ kind: "error", error: String(e.message ?? e) }),
        );
        if (script.cancelAfterMs != null) {
          setTimeout(() => ctx.notify("session/cancel", { sessionId: session.sessionId }), script.cancelAfterMs);
        }
        for (;;) {
          reading ??= session.nextUpdate();
          const next = await Promise.race([reading, done]);
          if (next.kind === "done") {
            // Its `stop` message is still queued: read up to it, so the next turn starts clean.
            turn.stopReason = next.response.stopReason;
            for (;;) {
              const rest = await (reading ?? session.nextUpdate());
              reading = null;
              if (rest.kind === "stop") break;
              record(turn, rest.update);
            }
            break;
          }
          if (next.kind === "error") { turn.error = next.error; break; }
          reading = null;
          if (next.kind === "stop") { turn.stopReason = next.stopReason; break; }
          record(turn, next.update);
        }
        await done;
      }
    });
} catch (e) {
  report.error = String(e.message ?? e);
}
proxy.stdin.end();
const timer = setTimeout(() => proxy.kill(), 3000);
report.exitCode = await exited;
clearTimeout(timer);
report.stderr = stderr;
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(0);
