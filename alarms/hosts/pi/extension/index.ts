/**
 * talk's pi extension: peer mail into a pi session as it arrives, each message once.
 *
 * `talk install pi` copies this folder to pi's extensions folder and writes talk.json beside
 * it: the interpreter talk is installed in (never a `python3` found on PATH), and the TALK_HOME
 * and TALK_USER to read mail from. For each session it starts talk's door
 * (`python -m alarms.hosts.pi.door`, see that module for the protocol), which registers the session
 * with pi's own pid and prints each batch of new mail, framed as peer data, as one JSON line.
 *
 * A batch goes to pi as a custom message (`pi.sendMessage`, customType "talk"), never as the
 * user's words: pi keeps it apart in the session and shows it as an extension's message, runs
 * no input handlers, commands or templates on it, and sends the model its text as a user-role
 * message. `triggerTurn: true` starts a turn when pi is idle; when busy, `deliverAs: "steer"`
 * puts it into the running turn before the next model request (after the current tool calls).
 *
 * The door moves the session's cursor only when the extension says a message was in a model
 * request, as seen in pi's `context` event, the last look at the messages before each request.
 * If the door dies it is started again and told what pi already holds, from the session's own
 * entries, so nothing is given to pi twice; if pi dies, nothing it did not send is lost.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";

const CUSTOM_TYPE = "talk";
const CONFIG_FILE = "talk.json";
const LOG_FILE = "talk.log";
const REMEMBERED = 512; // the ids the door is told at start: as many as its cursor remembers
const RESTART_MS = 1000;
const RESTART_MAX_MS = 30000;
const QUICK_EXIT_MS = 5000; // a door that ends sooner than this is restarted more slowly

interface Config {
	python: string;
	talk_home?: string;
	user?: string;
}

interface Batch {
	ids: string[];
	text: string;
}

interface TalkDetails {
	ids: string[];
}

type Message = { role: string; customType?: string; content?: unknown; details?: unknown };

const here = (): string => {
	try {
		return dirname(fileURLToPath(import.meta.url));
	} catch {
		return __dirname;
	}
};

function readConfig(dir: string): Config | undefined {
	try {
		const parsed: unknown = JSON.parse(readFileSync(join(dir, CONFIG_FILE), "utf8"));
		if (parsed && typeof parsed === "object" && typeof (parsed as Config).python === "string") {
			return parsed as Config;
		}
	} catch {
		// no config: not installed by `talk install pi`
	}
	return undefined;
}

function textOf(content: unknown): string {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.map((part) => (part && typeof part === "object" && typeof part.text === "string" ? part.text : ""))
		.join("");
}

function talkIds(message: Message): string[] {
	if (message.role !== "custom" || message.customType !== CUSTOM_TYPE) return [];
	const details = message.details as TalkDetails | undefined;
	return Array.isArray(details?.ids) ? details.ids.filter((id) => typeof id === "string") : [];
}

function parseBatch(line: string): Batch | undefined {
	try {
		const obj = JSON.parse(line) as Partial<Batch>;
		if (Array.isArray(obj.ids) && obj.ids.every((id) => typeof id === "string") && typeof obj.text === "string") {
			return { ids: obj.ids, text: obj.text };
		}
	} catch {
		// not a batch line: the door prints nothing else on stdout
	}
	return undefined;
}

/** One session's door: the child process, and which of its messages pi holds. */
class Door {
	private child: ChildProcess | undefined;
	private stopped = false;
	private started = 0;
	private delay = RESTART_MS;
	private timer: ReturnType<typeof setTimeout> | undefined;
	private readonly delivered = new Set<string>();
	private readonly queued = new Map<string, Batch>();

	constructor(
		private readonly pi: ExtensionAPI,
		private readonly dir: string,
		private readonly config: Config,
		private readonly sid: string,
		private readonly status: (text: string | undefined) => void,
	) {}

	/** What the session already holds: pi keeps every custom message it took in its entries. */
	learn(ctx: ExtensionContext): void {
		for (const entry of ctx.sessionManager.getEntries()) {
			const e = entry as unknown as Message & { type: string };
			if (e.type === "custom_message") for (const id of talkIds({ ...e, role: "custom" })) this.delivered.add(id);
		}
	}

	start(): void {
		if (this.stopped) return;
		const env = { ...process.env };
		if (this.config.talk_home && !env.TALK_HOME) env.TALK_HOME = this.config.talk_home;
		if (this.config.user && !env.TALK_USER) env.TALK_USER = this.config.user;
		const args = ["-I", "-m", "alarms.hosts.pi.door", "--session", this.sid, "--pid", String(process.pid)];
		const child = spawn(this.config.python, args, { env, stdio: ["pipe", "pipe", "pipe"] });
		this.child = child;
		this.started = Date.now();
		let pending = "";
		child.stdout?.on("data", (chunk: Buffer) => {
			// Split on LF only: a JSON string may hold U+2028, which readline would split on.
			const parts = (pending + chunk.toString("utf8")).split("\n");
			pending = parts.pop() ?? "";
			for (const line of parts) {
				const batch = parseBatch(line);
				if (batch) this.deliver(batch);
			}
		});
		child.stderr?.on("data", (chunk: Buffer) => this.log(chunk.toString("utf8").trimEnd()));
		child.stdin?.on("error", () => {}); // a dead door's stdin: its exit handler restarts it
		child.on("error", (err) => this.log(`cannot start ${this.config.python}: ${err.message}`));
		child.on("exit", (code, signal) => this.exited(child, code, signal));
		// Before anything else, what pi holds: a door started again must not print it again.
		this.tell({ delivered: [...this.delivered].slice(-REMEMBERED), queued: [...this.queued.keys()] });
	}

	stop(): void {
		this.stopped = true;
		if (this.timer) clearTimeout(this.timer);
		this.child?.stdin?.end();
		this.child?.kill("SIGTERM");
		this.child = undefined;
	}

	/** pi's context event: the messages of the request about to go out. */
	seen(messages: Message[]): void {
		const fresh: string[] = [];
		for (const message of messages) {
			const ids = talkIds(message);
			if (ids.length === 0) continue;
			const sent = this.queued.get(ids[0]);
			// Whole: the text pi is sending is the text the door framed (a resumed session's
			// messages were taken whole before; there is nothing to compare them with).
			if (sent && textOf(message.content) !== sent.text) {
				this.log(`a talk message in pi's context is not whole (${ids.join(", ")}); not acknowledged`);
				continue;
			}
			for (const id of ids) {
				if (this.delivered.has(id)) continue;
				this.delivered.add(id);
				this.queued.delete(id);
				fresh.push(id);
			}
		}
		if (fresh.length > 0) {
			this.tell({ delivered: fresh });
			this.showQueued();
		}
	}

	/** pi settled: a queued batch pi neither holds nor still queues was dropped; give it again. */
	settled(ctx: ExtensionContext): void {
		if (this.queued.size === 0 || ctx.hasPendingMessages()) return;
		const held = new Set<string>();
		for (const entry of ctx.sessionManager.getEntries()) {
			const e = entry as unknown as Message & { type: string };
			if (e.type === "custom_message") for (const id of talkIds({ ...e, role: "custom" })) held.add(id);
		}
		const again = new Map<string, Batch>();
		for (const [id, batch] of this.queued) if (!held.has(id)) again.set(batch.ids[0], batch);
		for (const batch of again.values()) this.send(batch);
	}

	private deliver(batch: Batch): void {
		if (batch.ids.every((id) => this.delivered.has(id))) {
			this.tell({ delivered: batch.ids });
			return;
		}
		for (const id of batch.ids) this.queued.set(id, batch);
		this.tell({ queued: batch.ids });
		this.send(batch);
		this.showQueued();
	}

	/** The footer says how many peer messages pi holds for the model's next request. */
	private showQueued(): void {
		const n = this.queued.size;
		this.status(n === 0 ? undefined : `talk: ${n} peer message${n === 1 ? "" : "s"} for the model`);
	}

	private send(batch: Batch): void {
		// One call fits both states: idle, triggerTurn starts a turn holding the message; busy,
		// steer hands it to the running turn before its next model request.
		this.pi.sendMessage<TalkDetails>(
			{ customType: CUSTOM_TYPE, content: batch.text, display: true, details: { ids: batch.ids } },
			{ triggerTurn: true, deliverAs: "steer" },
		);
	}

	private tell(state: { delivered?: string[]; queued?: string[] }): void {
		const stdin = this.child?.stdin;
		if (stdin && !stdin.destroyed) stdin.write(`${JSON.stringify(state)}\n`);
	}

	private exited(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
		if (this.child !== child) return;
		this.child = undefined;
		if (this.stopped) return;
		// Once at once-a-second; a door that keeps ending soon after its start, ever more slowly.
		const quick = Date.now() - this.started < QUICK_EXIT_MS;
		const wait = quick ? this.delay : RESTART_MS;
		this.delay = quick ? Math.min(this.delay * 2, RESTART_MAX_MS) : RESTART_MS;
		this.log(`door exited (${signal ?? code}); starting it again in ${wait / 1000} s`);
		this.timer = setTimeout(() => this.start(), wait);
	}

	private log(text: string): void {
		if (!text) return;
		try {
			appendFileSync(join(this.dir, LOG_FILE), `${new Date().toISOString()} ${this.sid} ${text}\n`);
		} catch {
			// a log that cannot be written must not stop the mail
		}
	}
}

export default function talk(pi: ExtensionAPI): void {
	const dir = here();
	let door: Door | undefined;

	pi.on("session_start", (_event, ctx) => {
		door?.stop();
		door = undefined;
		const config = readConfig(dir);
		if (!config) {
			if (ctx.hasUI) ctx.ui.notify(`talk: no ${CONFIG_FILE} in ${dir}; run \`talk install pi\``, "warning");
			return;
		}
		const status = (text: string | undefined) => {
			if (ctx.hasUI) ctx.ui.setStatus(CUSTOM_TYPE, text);
		};
		door = new Door(pi, dir, config, ctx.sessionManager.getSessionId(), status);
		door.learn(ctx);
		door.start();
	});
	pi.on("session_shutdown", () => {
		door?.stop();
		door = undefined;
	});
	pi.on("context", (event) => {
		door?.seen(event.messages as unknown as Message[]);
	});
	pi.on("agent_settled", (_event, ctx) => {
		door?.settled(ctx);
	});
}
