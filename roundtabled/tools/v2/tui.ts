// The roundtabled plugin's TUI part for OpenCode 2.x (installed by `roundtabled install-tool` as
// `.opencode/plugins/roundtabled/tui.ts`, beside the server part `index.ts`; docs/plugin.md,
// "Toasts on 2.x").
//
// OpenCode 2.x has no HTTP route for a toast, so the daemon keeps a roundtable's toasts (started,
// resumed, a failed turn, the progress ones, the end) and this part, which 2.x runs inside each
// TUI (also one attached with `--server`), long-polls the daemon's `GET /v1/notices` for those of
// the TUI's project and shows each with `ctx.ui.toast.show` (seen working on 2.1.2). A TUI shows
// only the notices made after it started. The daemon unreachable: it retries quietly (backing
// off to 30 s); a roundtable's progress is also in its child session and its result.
//
// Imports: `@opencode/plugin/tui` is resolved by the binary; `control.ts` is the control module
// install-tool writes for both majors (the daemon's URL and token file).

import { Plugin } from "@opencode/plugin/tui"
import { authHeaders, controlUrl } from "../../roundtabled/control.ts"

const WAIT_S = 25
const TOAST_MS = 5000
const MAX_BACKOFF_MS = 30000

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

// The TUI's project directory, if the context says it (its shape is not documented).
function directoryOf(ctx: any): string | undefined {
  try {
    const loc = typeof ctx?.location === "function" ? ctx.location() : ctx?.location
    const dir = loc?.directory ?? ctx?.data?.location?.default?.()?.directory
    return typeof dir === "string" && dir ? dir : undefined
  } catch {
    return undefined
  }
}

export default Plugin.define({
  id: "roundtabled",
  setup(ctx: any) {
    let stopped = false
    const poll = async () => {
      let after: number | undefined
      let backoff = 1000
      while (!stopped) {
        try {
          const query = new URLSearchParams()
          if (after !== undefined) {
            query.set("after", String(after))
            query.set("wait", String(WAIT_S))
          }
          const directory = directoryOf(ctx)
          if (directory) query.set("directory", directory)
          const res = await fetch(`${controlUrl()}/v1/notices?${query}`, {
            headers: await authHeaders(),
            signal: AbortSignal.timeout((WAIT_S + 10) * 1000),
          })
          if (!res.ok) throw new Error(`HTTP ${res.status}`)
          const body: any = await res.json()
          for (const notice of Array.isArray(body?.notices) ? body.notices : []) {
            if (stopped) break
            ctx.ui.toast.show({
              title: notice.title ?? "Roundtable",
              message: String(notice.message ?? ""),
              variant: notice.variant ?? "info",
              duration: TOAST_MS,
            })
          }
          if (typeof body?.next === "number") after = body.next
          backoff = 1000
        } catch {
          if (stopped) break
          await sleep(backoff)
          backoff = Math.min(backoff * 2, MAX_BACKOFF_MS)
        }
      }
    }
    void poll()
    return () => {
      stopped = true
    }
  },
})
