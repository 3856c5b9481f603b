// >>> roundtabled install (generated) >>>
const INSTALLED_URL = "http://127.0.0.1:4747"
const INSTALLED_TOKEN_FILE = ""
// <<< roundtabled install (generated) <<<

// How the OpenCode tools `roundtable` and `available_agents` and the roundtable plugin reach the
// roundtabled daemon's control API (docs/control-api.md): its URL, the token file, the headers,
// and the two problems every caller words alike. Installed by `roundtabled install-tool` as
// `roundtabled/control.ts` of the OpenCode config directory, beside `tool/` and `plugin/` and
// never in them: OpenCode 1.18.33 loads every top-level file of `tool/` as tool definitions and
// calls every exported function of a top-level file of `plugin/` as a plugin. The shims import it
// by relative path ("../roundtabled/control.ts"), so a project install and a global one each use
// their own copy.
// No import from npm (see tool/roundtable.ts: an offline server cannot install it). The exports
// are the contract with the shims of the same install: change them only compatibly (install-tool
// writes this file first, so a server loading meanwhile may see it beside the previous shims).

import { readFile } from "node:fs/promises"
import { homedir } from "node:os"

const env: Record<string, string | undefined> = (globalThis as any).process?.env ?? {}

/** The control API's base URL without a trailing slash: `ROUNDTABLED_URL` in `opencode serve`'s
 * environment, else the one install-tool baked in. */
export function controlUrl(): string {
  return (env.ROUNDTABLED_URL || INSTALLED_URL).replace(/\/+$/, "")
}

/** Path of the daemon's token file: `ROUNDTABLED_TOKEN_FILE`, else the baked one, else the
 * daemon's default `$XDG_CONFIG_HOME/roundtabled/token`. */
export function tokenFile(): string {
  if (env.ROUNDTABLED_TOKEN_FILE) return env.ROUNDTABLED_TOKEN_FILE
  if (INSTALLED_TOKEN_FILE) return INSTALLED_TOKEN_FILE
  const xdg = env.XDG_CONFIG_HOME?.startsWith("/") ? env.XDG_CONFIG_HOME : `${homedir()}/.config`
  return `${xdg}/roundtabled/token`
}

/** `{authorization: "Bearer …"}`, or `{}` when the token file is unreadable or empty (the
 * daemon then answers 401 and the caller reports the path: {@link tokenRejected}). Read on every
 * request: the daemon may have been restarted with a new token. Never throws. */
export async function authHeaders(): Promise<Record<string, string>> {
  try {
    const token = (await readFile(tokenFile(), "utf8")).trim()
    if (token) return { authorization: `Bearer ${token}` }
  } catch {
    // unreadable: see above
  }
  return {}
}

/** The "Error: …" text for a daemon that could not be reached (`err`: what fetch threw). */
export function notRunning(err: unknown): string {
  const e = err as any
  const why = [e?.code, e instanceof Error ? e.message : String(err)].filter(Boolean).join(": ")
  return (
    `Error: roundtabled is not running (${controlUrl()}: ${why}). ` +
    "Start it with: roundtabled serve  (or: systemctl --user start roundtabled)"
  )
}

/** The "Error: …" text for the daemon's HTTP 401, naming the token file read. */
export function tokenRejected(): string {
  return `Error: roundtabled rejected the token (token file ${tokenFile()}; set ROUNDTABLED_TOKEN_FILE or re-run roundtabled install-tool)`
}
