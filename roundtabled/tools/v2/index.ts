// The roundtabled plugin for OpenCode 2.x (installed by `roundtabled install-tool` as
// `.opencode/plugins/roundtabled/index.ts`; docs/plugin.md, "OpenCode 2.x").
//
// OpenCode 2.x loads no `.opencode/tool/*.ts` and refuses 1.x plugins, so this one plugin carries
// what the 1.x install splits over three files:
// - the tools `roundtable` and `available_agents` (`codemode: false`: else the model could call
//   them only inside Code Mode's `execute` tool). Their arguments, checks and calls to the
//   daemon's control API are the 1.x shims' own: install-tool copies `roundtable.ts` and
//   `available_agents.ts` beside `control.ts` into `.opencode/roundtabled/` (a folder 2.x loads
//   nothing from) and this plugin imports them, so both majors run the same code;
// - the `context` hook that leaves out of each model request what a roundtable hides;
// - its report to the daemon (`POST /v1/plugin` with PLUGIN_VERSION, the instance's directory and
//   this file, at setup and every 5 s, stopped when the instance is disposed), as the 1.x plugin
//   reports: the daemon trusts it once `GET /api/plugin` of that directory lists this file as the
//   active roundtabled plugin, and only then lets a seat turn's state write follow its prompt
//   (this version hides by the newest turn prompt's marker too; docs/plugin.md, "The context
//   hook").
//
// Imports: `@opencode/plugin` is resolved by the binary (nothing is npm-installed); the rest are
// relative imports of the files install-tool writes with it.

import { Plugin } from "@opencode/plugin"
import roundtable from "../../roundtabled/roundtable.ts"
import availableAgents from "../../roundtabled/available_agents.ts"
import { authHeaders, controlUrl } from "../../roundtabled/control.ts"

// The 2.x plugin protocol (engine/plugins.py PLUGIN_VERSION_V2): "v2.1" hides by the ids S2's
// metadata lists and by the newest turn prompt's marker. Change it with what the hook does.
const PLUGIN_VERSION = "v2.1"
const REPORT_TIMEOUT_MS = 2_000
const HEARTBEAT_MS = 5_000

// A 1.x tool's `args`: zod 4 schemas where zod was resolvable, else plain JSON Schema whose
// optional keys also take null (1.x lists every key as required). 2.x wants one JSON Schema.
async function inputSchema(args: Record<string, any>, required: string[]): Promise<any> {
  const zodded = Object.values(args).some((v) => v && typeof v === "object" && "_zod" in v)
  if (zodded) {
    for (const spec of ["zod/v4", "zod"]) {
      try {
        const mod: any = await import(spec)
        const z = mod.z ?? mod.default ?? mod
        if (typeof z?.toJSONSchema === "function") {
          const schema = z.toJSONSchema(z.object(args))
          delete schema.$schema
          return schema
        }
      } catch {
        // try the next name
      }
    }
  }
  return { type: "object", properties: args, required, additionalProperties: false }
}

// What a 1.x shim returns (a string, or {title, output, metadata}) as a 2.x tool result.
function toResult(value: any): { content: string; metadata?: Record<string, unknown> } {
  if (typeof value === "string") return { content: value }
  if (value && typeof value === "object" && typeof value.output === "string") {
    return { content: value.output, metadata: { ...(value.metadata ?? {}), title: value.title } }
  }
  return { content: String(value) }
}

// The message ids a session's metadata lists as hidden (docs/plugin.md, "The context hook"):
// `metadata.roundtabled.hidden`, an array of message ids; anything else lists nothing.
function listedHidden(info: any): Set<string> {
  const hidden = info?.metadata?.roundtabled?.hidden
  return new Set(Array.isArray(hidden) ? hidden.filter((id: unknown) => typeof id === "string") : [])
}

// A user message whose own metadata says `{"roundtabled": {"hidden": true}}`.
function marksItselfHidden(message: any): boolean {
  return message?.role === "user" && message?.metadata?.roundtabled?.hidden === true
}

// The signed marker of a roundtabled turn prompt of the roundtable `sessionID` (a user message's
// `metadata.roundtabled`, kind `turn` or `observer`: docs/plugin.md, "The context hook"), or null.
type TurnMarker = { kind: string; round: number; seat: number; view?: string; hide?: unknown }
function turnMarker(message: any, sessionID: string): TurnMarker | null {
  if (message?.role !== "user") return null
  const md = message?.metadata?.roundtabled
  if (!md || typeof md !== "object" || md.roundtable !== sessionID) return null
  if (md.kind !== "turn" && md.kind !== "observer") return null
  return typeof md.round === "number" && typeof md.seat === "number" ? md : null
}

// The message ids the newest turn prompt's marker leaves out of its requests, from the
// messages alone (the daemon's rule, roundtabled/core/hiding.py; docs/plugin.md "The context
// hook"), so a turn's first request is shaped before the daemon's state write lands. Only when
// that marker says `view: "plugin"`: every earlier turn prompt but the opening one (round 0,
// seat 0: it carries the topic); and, for a seat's turn, every earlier observer prompt and the
// seat turns of the rounds its `hide: [first, last]` names (0-indexed, context "recent"), each
// with its reply (the messages after it up to the next user message: 2.x's entries carry no
// parent id). A person's note carries no marker and is never keyed on.
function markedHidden(messages: any[], sessionID: string): Set<string> {
  const marks = messages.map((m) => turnMarker(m, sessionID))
  const out = new Set<string>()
  let latest = -1
  for (let i = marks.length - 1; i >= 0; i--) {
    if (marks[i]) {
      latest = i
      break
    }
  }
  const head = latest >= 0 ? marks[latest]! : null
  if (!head || head.view !== "plugin") return out
  const span =
    Array.isArray(head.hide) && head.hide.length === 2 && head.hide.every((r) => typeof r === "number")
      ? (head.hide as number[])
      : null
  for (let i = 0; i < latest; i++) {
    const m = marks[i]
    if (!m || (m.kind === "turn" && m.round === 0 && m.seat === 0)) continue
    if (typeof messages[i]?.id === "string") out.add(messages[i].id)
    const whole =
      head.kind === "turn" &&
      (m.kind === "observer" || (span !== null && m.round >= span[0] && m.round <= span[1]))
    if (!whole) continue
    for (let j = i + 1; j < latest && messages[j]?.role !== "user"; j++) {
      if (typeof messages[j]?.id === "string") out.add(messages[j].id)
    }
  }
  return out
}

// The tool-call ids of the assistant messages in `messages`.
function toolCallIds(messages: any[]): Set<string> {
  const ids = new Set<string>()
  for (const m of messages) {
    if (m?.role !== "assistant" || !Array.isArray(m?.content)) continue
    for (const part of m.content) {
      if (part?.type === "tool-call" && typeof part.id === "string") ids.add(part.id)
    }
  }
  return ids
}

// A `tool` message that only answers tool calls in `calls`: it goes with them (a hidden reply's
// tool results carry no id of the reply, and a provider refuses a tool result whose call is gone).
function answersOnly(message: any, calls: Set<string>): boolean {
  const parts = message?.role === "tool" ? message?.content : undefined
  return (
    Array.isArray(parts) &&
    parts.length > 0 &&
    parts.every((p: any) => p?.type === "tool-result" && calls.has(p?.id))
  )
}

export default Plugin.define({
  id: "roundtabled",
  async setup(ctx: any) {
    const pluginDirectory: string | undefined = ctx?.location?.directory

    // This file, as `GET /api/plugin` lists the plugin's source path (Bun's import.meta.path,
    // seen on 2.1.2): the daemon trusts the report only while this file is the active one.
    const pluginFile: string | undefined = (import.meta as any).path

    // Tells the daemon this plugin runs for the instance's directory (docs/plugin.md, "The
    // context hook"). Never throws: a daemon not running hears from the next heartbeat.
    const report = async () => {
      if (typeof pluginDirectory !== "string" || !pluginDirectory.startsWith("/")) return
      if (typeof pluginFile !== "string" || !pluginFile.startsWith("/")) return
      try {
        await fetch(`${controlUrl()}/v1/plugin`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(await authHeaders()) },
          body: JSON.stringify({
            version: PLUGIN_VERSION,
            directory: pluginDirectory,
            file: pluginFile,
          }),
          signal: AbortSignal.timeout(REPORT_TIMEOUT_MS),
        })
      } catch {
        // the daemon is not running or refused it: it writes each state before the prompt
      }
    }
    void report()
    const timer: any = setInterval(() => void report(), HEARTBEAT_MS)
    timer?.unref?.()

    // The session's own directory: 2.x gives a tool no directory, and the plugin's location is
    // its instance's, not necessarily the session's (a global install's plugin runs in the
    // project's instance, seen on 2.1.2, but the docs promise no more). The plugin's location
    // when the session cannot be read.
    async function directoryOf(sessionID: string): Promise<string | undefined> {
      try {
        const info: any = await ctx.session.get({ sessionID })
        return info?.location?.directory ?? pluginDirectory
      } catch {
        return pluginDirectory
      }
    }

    // The 1.x tool context the shims read, from 2.x's: the session id (S1), the call and message
    // ids, the directory, and the AbortSignal that fires when the session is interrupted (the
    // roundtable shim then cancels the roundtable, as on 1.x).
    async function shimContext(tool: any): Promise<Record<string, unknown>> {
      return {
        sessionID: tool?.sessionID,
        messageID: tool?.messageID,
        callID: tool?.id,
        agent: tool?.agent,
        abort: tool?.signal,
        directory: tool?.sessionID ? await directoryOf(tool.sessionID) : pluginDirectory,
      }
    }

    const roundtableInput = await inputSchema(roundtable.args as Record<string, any>, ["prompt"])
    const agentsInput = await inputSchema(availableAgents.args as Record<string, any>, [])

    await ctx.tool.transform((editor: any) => {
      editor.add({
        name: "roundtable",
        description: roundtable.description,
        options: { codemode: false },
        input: roundtableInput,
        async execute(input: any, tool: any) {
          return toResult(await roundtable.execute(input, await shimContext(tool)))
        },
      })
      editor.add({
        name: "available_agents",
        description: availableAgents.description,
        options: { codemode: false },
        input: agentsInput,
        async execute(input: any, tool: any) {
          return toResult(await availableAgents.execute(input, await shimContext(tool)))
        },
      })
    })

    // Runs before every step's model request; changes only that request, never the stored
    // history. A throw here fails the execution (no model call), so everything is caught and
    // an error leaves the request as it was.
    await ctx.session.hook("context", async (event: any) => {
      try {
        if (!Array.isArray(event?.messages)) return
        let listed = new Set<string>()
        try {
          listed = listedHidden(await ctx.session.get({ sessionID: event.sessionID }))
        } catch {
          // the session cannot be read: only the messages' own marks count
        }
        const marked = markedHidden(event.messages, event.sessionID)
        const hidden = (m: any) => listed.has(m?.id) || marked.has(m?.id) || marksItselfHidden(m)
        const calls = toolCallIds(event.messages.filter(hidden))
        const kept = event.messages.filter((m: any) => !hidden(m) && !answersOnly(m, calls))
        if (kept.length !== event.messages.length) event.messages = kept
      } catch {
        // leave the request unchanged
      }
    })

    // Called when the instance is disposed (2.1.2 runs a function setup returns at release):
    // a disposed instance's plugin stops reporting.
    return () => clearInterval(timer)
  },
})
