// OpenCode plugin `roundtable` (installed by `roundtabled install-tool`, docs/plugin.md).
//
// Thin: it shapes the model request of a roundtable's session (S2) in memory, as the daemon's
// own signed turn markers say, and stores nothing (OpenCode re-reads the session on every step:
// the TUI, the export and recovery keep seeing every message).
// - Acts only on a session whose user messages carry a roundtabled turn marker naming that
//   session (`metadata.roundtabled.roundtable === info.sessionID`); every other session, a
//   seat's sub-task included, is left as it is.
// - Keys on the latest *daemon* prompt (marker kind `turn` / `observer`), never on the latest
//   message: a person's note posted into S2 does not bring the old prompts back.
// - Only when that prompt's marker says `view: "plugin"` (the daemon chose the plugin mode): it
//   leaves out every earlier seat turn prompt (except round 1's first, which carries the topic),
//   and, for `hide: [first, last]` (0-indexed rounds, context "recent"), the prompts of those
//   rounds' turns and their replies; from a seat's request, every earlier observer prompt and
//   its reply (an extension's seats do not see the verdict before it). Whole messages are spliced out of `output.messages` in place
//   (assigning a new array does nothing). The first message stays a user message.
// - Adds no words of its own; idempotent (installed in the project and globally it runs twice:
//   the second run finds nothing left to remove); any error leaves the list untouched and is
//   logged, never thrown (a throwing hook fails the turn).
// - Reports itself to the daemon's control API (POST /v1/plugin) when OpenCode loads it into a
//   directory's instance, every 5 s after (a daemon started or reconnected later hears from it),
//   and when it shapes a roundtable's request (at most once a second); it stops when the
//   instance is disposed. The daemon uses the plugin mode only on such a report, once its own
//   connection to the server confirms it: the `config` hook marks the configuration of the
//   instance it runs in (PLUGIN_MARK in `watcher.ignore`, a pattern that matches no file), and the
//   daemon reads that instance's `GET /config` through its own connection. So a report is
//   trusted through a proxy or a tunnel (the server's URL is not its identity), and never for
//   another server in the same directory, nor for a server that lists the file but runs no
//   plugin (`--pure`).
// No import from npm (see tool/roundtable.ts: an offline server cannot install it). The daemon's
// URL and token file come from ../roundtabled/control.ts, installed with it, outside `plugin/`:
// OpenCode calls every exported function of a top-level file there as a plugin.

import { authHeaders, controlUrl } from "../roundtabled/control.ts"

const PLUGIN_VERSION = "3"
const PLUGIN_MARK = "roundtabled:roundtable-plugin-ran"
const META = "roundtabled"
const REPORT_TIMEOUT_MS = 2_000
const REPORT_EVERY_MS = 1_000
const HEARTBEAT_MS = 5_000

type Marker = { kind: string; round: number; seat: number; view?: string; hide?: number[] }

function markerOf(msg: any): Marker | null {
  const info = msg?.info
  if (!info || info.role !== "user") return null
  for (const part of msg.parts ?? []) {
    const md = part?.type === "text" ? part.metadata?.[META] : undefined
    if (!md || typeof md !== "object") continue
    if ((md.kind === "turn" || md.kind === "observer") && md.roundtable === info.sessionID) {
      return md as Marker
    }
  }
  return null
}

/** Indexes of `messages` to leave out of this request (none when the session is no roundtable
 * or the daemon runs it in patch mode). Pure: reads `messages` only. */
function toRemove(messages: any[]): number[] {
  const marks = messages.map(markerOf)
  let latest = -1
  for (let i = marks.length - 1; i >= 0; i--) {
    if (marks[i]) {
      latest = i
      break
    }
  }
  if (latest < 0) return []
  const head = marks[latest]!
  if (head.view !== "plugin") return []
  const span = Array.isArray(head.hide) && head.hide.length === 2 ? head.hide : null
  const out = new Set<number>()
  const hiddenPrompts = new Set<string>()
  for (let i = 0; i < latest; i++) {
    const m = marks[i]
    if (!m) continue
    if (m.kind === "observer") {
      // A seat's request never holds an earlier verdict: the observer is no debater.
      if (head.kind === "turn") {
        out.add(i)
        hiddenPrompts.add(String(messages[i].info.id))
      }
      continue
    }
    if (m.kind !== "turn") continue
    if (!(m.round === 0 && m.seat === 0)) out.add(i)
    if (span && m.round >= span[0] && m.round <= span[1]) {
      out.add(i)
      hiddenPrompts.add(String(messages[i].info.id))
    }
  }
  if (hiddenPrompts.size) {
    for (let i = 0; i < latest; i++) {
      const info = messages[i]?.info
      if (info?.role === "assistant" && hiddenPrompts.has(String(info.parentID))) out.add(i)
    }
  }
  if (!out.size) return []
  const first = messages.findIndex((_, i) => !out.has(i))
  if (first < 0 || messages[first]?.info?.role !== "user") {
    throw new Error("leaving these messages out would not start the request with a user message")
  }
  return [...out].sort((a, b) => b - a)
}

export const RoundtablePlugin = async (input: any) => {
  const directory = String(input?.directory ?? "")
  const serverUrl = String(input?.serverUrl ?? "")
  let lastReport = 0

  const log = (level: "warn" | "error", message: string) => {
    try {
      void Promise.resolve(
        input?.client?.app?.log?.({ body: { service: "roundtable-plugin", level, message } }),
      ).catch(() => {})
    } catch {
      // logging must never fail the turn
    }
    try {
      console.error(`[roundtable-plugin] ${message}`)
    } catch {}
  }

  const report = async () => {
    lastReport = Date.now()
    try {
      const res = await fetch(`${controlUrl()}/v1/plugin`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(await authHeaders()) },
        body: JSON.stringify({ version: PLUGIN_VERSION, directory, serverUrl }),
        signal: AbortSignal.timeout(REPORT_TIMEOUT_MS),
      })
      if (!res.ok) log("warn", `the daemon refused the plugin's report: HTTP ${res.status}`)
    } catch {
      // the daemon is not running: it starts in patch mode and hears from us on the next turn
    }
  }

  // Awaited: OpenCode waits for a plugin's setup before the instance answers, so the daemon's
  // first read of the directory finds the report in place.
  await report()
  const timer: any = setInterval(() => void report(), HEARTBEAT_MS)
  timer?.unref?.()

  return {
    config: async (config: any) => {
      try {
        const watcher = (config.watcher ??= {})
        const ignore: unknown[] = Array.isArray(watcher.ignore) ? watcher.ignore : []
        // Installed twice (project and global) it runs twice: one mark is enough.
        if (!ignore.includes(PLUGIN_MARK)) watcher.ignore = [...ignore, PLUGIN_MARK]
      } catch (err) {
        log("error", `could not mark the configuration: ${err instanceof Error ? err.message : err}`)
      }
    },
    event: async ({ event }: any) => {
      if (event?.type === "server.instance.disposed") clearInterval(timer)
    },
    "experimental.chat.messages.transform": async (_input: unknown, output: any) => {
      try {
        const messages = output?.messages
        if (!Array.isArray(messages)) return
        const drop = toRemove(messages)
        if (!drop.length && !messages.some(markerOf)) return
        for (const i of drop) messages.splice(i, 1)
        if (Date.now() - lastReport >= REPORT_EVERY_MS) void report()
      } catch (err) {
        log("error", `left the request as it was: ${err instanceof Error ? err.message : err}`)
      }
    },
  }
}
