// OpenCode custom tool `available_agents` (installed by `roundtabled install-tool`).
//
// Asks the roundtabled daemon which agents a roundtable may seat (GET /v1/agents) and returns its
// one-line text, e.g. "Available agents: dev, pm, rv". No imports beyond Bun/Node built-ins and
// ../roundtabled/control.ts (the daemon's URL and token file, installed with it), so it loads
// even where OpenCode could not npm-install @opencode-ai/plugin (see roundtable.ts).

import { authHeaders, controlUrl, notRunning, tokenRejected } from "../roundtabled/control.ts"

const TIMEOUT_MS = 10_000

async function execute(_args: unknown, ctx: any): Promise<string> {
  const headers = await authHeaders()
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
    return notRunning(err)
  }
  if (resp.status === 401) return tokenRejected()
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
