// >>> roundtabled install (generated) >>>
const INSTALLED_URL = "http://127.0.0.1:4747"
const INSTALLED_TOKEN_FILE = ""
// <<< roundtabled install (generated) <<<

// OpenCode custom tool `available_agents` (installed by `roundtabled install-tool`).
//
// Asks the roundtabled daemon which agents a roundtable may seat (GET /v1/agents) and returns its
// one-line text, e.g. "Available agents: dev, pm, rv". No imports beyond Bun/Node built-ins, so it
// loads even where OpenCode could not npm-install @opencode-ai/plugin (see roundtable.ts).

import { readFile } from "node:fs/promises"
import { homedir } from "node:os"

const TIMEOUT_MS = 10_000
const env: Record<string, string | undefined> = (globalThis as any).process?.env ?? {}

function controlUrl(): string {
  return (env.ROUNDTABLED_URL || INSTALLED_URL).replace(/\/+$/, "")
}

function tokenFile(): string {
  if (env.ROUNDTABLED_TOKEN_FILE) return env.ROUNDTABLED_TOKEN_FILE
  if (INSTALLED_TOKEN_FILE) return INSTALLED_TOKEN_FILE
  const xdg = env.XDG_CONFIG_HOME?.startsWith("/") ? env.XDG_CONFIG_HOME : `${homedir()}/.config`
  return `${xdg}/roundtabled/token`
}

async function execute(_args: unknown, ctx: any): Promise<string> {
  const headers: Record<string, string> = {}
  try {
    const token = (await readFile(tokenFile(), "utf8")).trim()
    if (token) headers.authorization = `Bearer ${token}`
  } catch {
    // unreadable: the daemon answers 401 and we report the path
  }
  const signals = [AbortSignal.timeout(TIMEOUT_MS)]
  if (ctx?.abort) signals.push(ctx.abort)
  const dir = ctx?.directory ? `?directory=${encodeURIComponent(ctx.directory)}` : ""
  let resp: Response
  try {
    resp = await fetch(`${controlUrl()}/v1/agents${dir}`, { headers, signal: AbortSignal.any(signals) })
  } catch (err: any) {
    if (ctx?.abort?.aborted) return "Error: cancelled"
    if (err?.name === "TimeoutError")
      return `Error: roundtabled at ${controlUrl()} did not answer within ${TIMEOUT_MS / 1000} s`
    const why = [err?.code, err instanceof Error ? err.message : String(err)].filter(Boolean).join(": ")
    return (
      `Error: roundtabled is not running (${controlUrl()}: ${why}). ` +
      "Start it with: roundtabled serve  (or: systemctl --user start roundtabled)"
    )
  }
  if (resp.status === 401)
    return `Error: roundtabled rejected the token (token file ${tokenFile()}; set ROUNDTABLED_TOKEN_FILE or re-run roundtabled install-tool)`
  const text = await resp.text()
  let data: any = null
  try {
    data = JSON.parse(text)
  } catch {
    return `Error: roundtabled answered HTTP ${resp.status} with non-JSON: ${text.slice(0, 200)}`
  }
  if (resp.status !== 200 || typeof data?.text !== "string") {
    const msg = typeof data?.error === "string" ? data.error : `HTTP ${resp.status}`
    return msg.startsWith("Error:") ? msg : `Error: roundtabled could not list the agents: ${msg}`
  }
  return data.text
}

export default {
  description:
    "List the agents that can take part in a roundtable (their names go into the roundtable " +
    "tool's `agents` and `observer`) and the configured presets (for its `preset`). Returns e.g. " +
    "\"Available agents: dev, pm, rv. Presets (roundtable's preset argument): design-review\".",
  args: {},
  execute,
}
