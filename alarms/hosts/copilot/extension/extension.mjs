/**
 * talk's Copilot CLI extension: the private door into the session Copilot shows.
 *
 * `talk install copilot` copies this file to `<copilot home>/extensions/talk/` and writes
 * talk.json beside it: the interpreter talk runs on and the TALK_HOME (and TALK_USER) to read
 * mail from. Copilot CLI starts each extension as its own child process, talking JSON-RPC over
 * that child's stdin and stdout, so nothing here listens where another user could reach it.
 * Copilot loads extensions only when its EXTENSIONS feature is on (`enabledFeatureFlags.EXTENSIONS`
 * in settings.json, or --experimental), and only once the folder is trusted.
 *
 * This file decides nothing: it joins the session, starts talk's door
 * (`python -I -m alarms.hosts.copilot.ext_door`) and relays newline-delimited JSON between the
 * two. To the door's stdin go the session events it decides by (`{"event": {type, data}}`) and
 * the answers to its calls (`{"id", "result"}` or `{"id", "error"}`); from its stdout come calls
 * (`{"id", "method", "params"}`): "session.send" and "session.permissions.pendingRequests".
 */

import { spawn } from "node:child_process";
import { appendFileSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { joinSession } from "@github/copilot-sdk/extension";

const HERE = dirname(fileURLToPath(import.meta.url));
const LOG = join(HERE, "talk.log");
const RESTART_MS = 5000;
const EVENTS = new Set([
	"user.message", "assistant.turn_start", "assistant.idle", "session.idle", "tool.execution_start",
	"tool.execution_complete", "permission.requested", "permission.completed", "session.info",
]);

const note = (line) => {
	try {
		appendFileSync(LOG, `${new Date().toISOString()} ${line}\n`);
	} catch {
		// no log is no reason to stop
	}
};

const config = JSON.parse(readFileSync(join(HERE, "talk.json"), "utf8"));
const session = await joinSession({});
let door;
let stopping = false;

const write = (message) => {
	if (door?.stdin.writable) door.stdin.write(`${JSON.stringify(message)}\n`);
};

async function answer(call) {
	try {
		if (call.method === "session.send") {
			const params = call.params ?? {};
			const messageId = await session.send({ prompt: String(params.prompt), mode: params.mode });
			write({ id: call.id, result: { messageId } });
		} else if (call.method === "session.permissions.pendingRequests") {
			write({ id: call.id, result: await session.rpc.permissions.pendingRequests() });
		} else {
			write({ id: call.id, error: `no such call: ${call.method}` });
		}
	} catch (error) {
		write({ id: call.id, error: String(error?.message ?? error) });
	}
}

function start() {
	const env = { ...process.env };
	if (config.talk_home) env.TALK_HOME = config.talk_home;
	if (config.user) env.TALK_USER = config.user;
	const args = ["-I", "-m", "alarms.hosts.copilot.ext_door", "--session", session.sessionId,
		"--workspace", session.workspacePath ?? "", "--pid", String(process.env.COPILOT_EXTENSION_PARENT_PID ?? process.ppid)];
	const child = spawn(config.python, args, { env, stdio: ["pipe", "pipe", "pipe"] });
	door = child;
	let buffer = "";
	child.stdout.setEncoding("utf8");
	child.stdout.on("data", (chunk) => {
		const lines = (buffer + chunk).split("\n");
		buffer = lines.pop() ?? "";
		for (const line of lines) {
			try {
				const call = JSON.parse(line);
				if (call && typeof call === "object" && "id" in call) void answer(call);
			} catch {
				note(`not a call from the door: ${line.slice(0, 200)}`);
			}
		}
	});
	child.stderr.setEncoding("utf8");
	child.stderr.on("data", (chunk) => note(chunk.trimEnd()));
	child.stdin.on("error", () => {});
	child.on("error", (error) => note(`cannot start talk's door: ${error.message}`));
	child.on("exit", (code) => {
		if (door === child) door = undefined;
		if (!stopping) {
			note(`talk's door ended (${code}); starting it again`);
			setTimeout(() => { if (!stopping && !door) start(); }, RESTART_MS);
		}
	});
}

session.on((event) => {
	if (EVENTS.has(event.type)) write({ event: { type: event.type, data: event.data ?? {} } });
});
process.on("SIGTERM", () => {
	// The door sees its stdin end and retires the session: its unread mail goes to the next one.
	stopping = true;
	door?.stdin.end();
	process.exit(0);
});
start();
