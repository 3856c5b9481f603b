// OpenCode custom tool `roundtable` (installed by `roundtabled install-tool`).
//
// A thin shim: it validates the arguments, hands the call to the roundtabled daemon's control API
// (docs/control-api.md) and long-polls for the result. The debate itself runs in the daemon.
//
// Loading rules learnt from OpenCode 1.18.33 (see roundtabled/service/install.py):
// - No static import of `@opencode-ai/plugin` or `zod`: when OpenCode's npm install of the plugin
//   into `.opencode/` cannot run (no network), a tool importing it fails to load and takes the
//   whole tool registry down with it (every tool call / tool listing answers HTTP 500).
//   A default export with {description, args, execute} is all OpenCode needs.
// - `args` made of zod schemas give a proper JSON schema (optional fields); zod is therefore
//   imported *dynamically* when resolvable (it is after a normal plugin install). Otherwise the
//   args are plain JSON Schema, which OpenCode marks all as required: the optional fields then
//   accept `null` meaning "omitted".
// - OpenCode does not validate args at run time, so `execute` does (errors start with "Error:").
// - `context.abort` also fires ~50 ms after a normal completion: ignored once decided.
// - The daemon's URL and token file come from ../roundtabled/control.ts (installed with it, the
//   one file install-tool fills in): a relative import of a sibling folder of `tool/`, since
//   OpenCode loads every top-level file of `tool/` as a tool.

import { authHeaders, controlUrl, notRunning, tokenRejected } from "../roundtabled/control.ts"

const MAX_ROUNDS = 50
const MAX_TITLE = 200
const MAX_AGENTS = 12
const MAX_PROMPT = 100_000
const SESSION_RE = /^ses_[A-Za-z0-9]{6,64}$/
const CREATE_TIMEOUT_MS = 15_000
const POLL_WAIT_S = 25
const POLL_TIMEOUT_MS = 35_000
const LOST_CONTACT_MS = 120_000
const STARTING_MAX_MS = 600_000
const CANCEL_TIMEOUT_MS = 500

// ---- arguments -------------------------------------------------------------------------------

// The values of each choice, the one list both schema forms below use. They are the daemon's
// (roundtabled/core/state.py: Until, Opening, ContextMode, ProtocolName):
// tests/unit/test_protocols.py fails when they differ.
const CHOICES = {
  extendMode: ["continuation", "new-topic"],
  until: ["rounds", "converged"],
  opening: ["sequential", "independent"],
  context: ["full", "recent"],
  protocol: ["debate", "vote", "adaptive", "council"],
} as const

const D = {
  agents:
    "Agent names in speaking order, at least 2, each at most once (call available_agents for " +
    "the names). Required for a new roundtable; omit when extending one with sessionID.",
  prompt:
    "The topic or challenge the agents debate. For several rounds, say what each round should " +
    "cover: every agent sees the whole agenda. When extending, the follow-up question.",
  rounds: "Number of complete rounds (each agent speaks once per round): an integer from 1 to 50. Default 1.",
  observer:
    "Agent that writes the final summary after the last round (it does not debate). Omit for " +
    "the built-in impartial observer.",
  sessionID:
    "ID of a concluded roundtable (\"ses_…\", as returned by an earlier roundtable call) to " +
    "continue it with the same agents. Omit to start a new roundtable.",
  title: "Title of the roundtable session, at most 200 characters. Default: derived from the prompt.",
  extendMode:
    "Only with sessionID: \"continuation\" goes deeper into the same discussion, \"new-topic\" " +
    "starts a new topic with the same agents. Default: guessed from the prompt.",
  until:
    "\"rounds\" (default) runs every round; \"converged\" stops once every seat kept its stated " +
    "position for a round (or all hold the same one), then the observer sums up.",
  budget:
    "Limits of this call, any of {tokens, usd, seconds} (tokens = input + output as the server " +
    "counts them): the debate stops before a turn would exceed them, keeping room for the observer.",
  opening:
    "\"sequential\" (default): round 1 one agent after another; \"independent\": round 1 runs " +
    "in parallel, each agent answering the topic alone without seeing the others, then every " +
    "agent sees every opening from round 2 on. New roundtables only.",
  context:
    "\"full\" (default): every agent sees every earlier reply; \"recent\": each agent sees the " +
    "topic, round 1, a digest of the rounds between (from the agents' stated positions) and the " +
    "last round in full, which keeps long debates short (needs the roundtable plugin; refused " +
    "without it). The observer always sees everything.",
  preset:
    "Name of a panel configured in roundtabled (agents, rounds, until, budget…; available_agents " +
    "lists them). Explicit arguments override it. New roundtables only.",
  sides:
    "Give seats a side to argue, as {agent: side}: \"for\", \"against\", \"neutral\", or a " +
    "one-line brief (e.g. {\"rv\": \"devil's advocate: argue against the majority\"}). A " +
    "side-bound seat's position is shown and marked, never counted toward the consensus or " +
    "convergence. New roundtables only.",
  protocol:
    "How the agents reach an answer. \"debate\" (default): rounds of turns, each agent reading " +
    "the others. \"vote\": every agent answers once, independently and in parallel; the answers " +
    "are counted by stance, weighted by each agent's stated confidence (no rounds, until, " +
    "opening, context, sides or budget). \"adaptive\": the independent answers first; stop there " +
    "when one stance holds a confidence-weighted share of at least adaptiveThreshold, else debate " +
    "until converged or the rounds (default 3) run out (no until, opening or sides). " +
    "\"council\": the independent answers, then each agent ranks the others' answers " +
    "anonymised, with a reason per rank; the observer chairs and decides from the answers and " +
    "the aggregate rank (refuses what vote refuses). New roundtables only.",
  adaptiveThreshold:
    "Only with protocol \"adaptive\": the confidence-weighted share (above 0.5, at most 1; " +
    "default 0.67) of the leading stance at which it stops without a debate.",
  dryRun:
    "true: run nothing and return the plan (seats and models, turns, requests, estimated input " +
    "tokens and cost at the server's prices, the budget's expected stop). New roundtables only.",
}

async function loadZod(): Promise<any> {
  for (const spec of ["zod/v4", "zod"]) {
    try {
      const mod: any = await import(spec)
      const z = mod.z ?? mod.default ?? mod
      if (z?.string && typeof z.string()._zod === "object") return z // zod 4 only
    } catch {
      // not installed here: fall back to JSON Schema
    }
  }
  return null
}

function buildArgs(z: any): Record<string, unknown> {
  if (z) {
    return {
      agents: z.array(z.string()).min(2).optional().describe(D.agents),
      prompt: z.string().describe(D.prompt),
      rounds: z.number().int().min(1).max(MAX_ROUNDS).optional().describe(D.rounds),
      observer: z.string().optional().describe(D.observer),
      sessionID: z.string().optional().describe(D.sessionID),
      title: z.string().max(MAX_TITLE).optional().describe(D.title),
      extendMode: z.enum(CHOICES.extendMode).optional().describe(D.extendMode),
      until: z.enum(CHOICES.until).optional().describe(D.until),
      budget: z
        .object({
          tokens: z.number().int().positive().optional(),
          usd: z.number().positive().optional(),
          seconds: z.number().positive().optional(),
        })
        .optional()
        .describe(D.budget),
      preset: z.string().optional().describe(D.preset),
      opening: z.enum(CHOICES.opening).optional().describe(D.opening),
      protocol: z.enum(CHOICES.protocol).optional().describe(D.protocol),
      adaptiveThreshold: z.number().gt(0.5).max(1).optional().describe(D.adaptiveThreshold),
      sides: z.record(z.string(), z.string()).optional().describe(D.sides),
      dryRun: z.boolean().optional().describe(D.dryRun),
      context: z.enum(CHOICES.context).optional().describe(D.context),
    }
  }
  // Plain JSON Schema: OpenCode lists every key as required, so optional ones take null.
  const omit = " Pass null to omit."
  return {
    agents: { type: ["array", "null"], items: { type: "string" }, minItems: 2, description: D.agents + omit },
    prompt: { type: "string", description: D.prompt },
    rounds: { type: ["integer", "null"], minimum: 1, maximum: MAX_ROUNDS, description: D.rounds + omit },
    observer: { type: ["string", "null"], description: D.observer + omit },
    sessionID: { type: ["string", "null"], description: D.sessionID + omit },
    title: { type: ["string", "null"], maxLength: MAX_TITLE, description: D.title + omit },
    extendMode: { enum: [...CHOICES.extendMode, null], description: D.extendMode + omit },
    until: { enum: [...CHOICES.until, null], description: D.until + omit },
    budget: {
      type: ["object", "null"],
      properties: {
        tokens: { type: "integer", minimum: 1 },
        usd: { type: "number", exclusiveMinimum: 0 },
        seconds: { type: "number", exclusiveMinimum: 0 },
      },
      description: D.budget + omit,
    },
    preset: { type: ["string", "null"], description: D.preset + omit },
    opening: { enum: [...CHOICES.opening, null], description: D.opening + omit },
    protocol: { enum: [...CHOICES.protocol, null], description: D.protocol + omit },
    adaptiveThreshold: {
      type: ["number", "null"],
      exclusiveMinimum: 0.5,
      maximum: 1,
      description: D.adaptiveThreshold + omit,
    },
    sides: {
      type: ["object", "null"],
      additionalProperties: { type: "string" },
      description: D.sides + omit,
    },
    dryRun: { type: ["boolean", "null"], description: D.dryRun + omit },
    context: { enum: [...CHOICES.context, null], description: D.context + omit },
  }
}

function show(value: unknown): string {
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return text.length > 80 ? text.slice(0, 79) + "…" : text
}

const given = (v: unknown) => v !== undefined && v !== null

// Returns the request body for POST /v1/roundtables, or an "Error: …" string.
function validate(args: any): Record<string, unknown> | string {
  args = args ?? {}
  const body: Record<string, unknown> = {}
  const { prompt, agents, rounds, observer, sessionID, title, extendMode } = args
  if (typeof prompt !== "string" || !prompt.trim())
    return `Error: prompt must be a non-empty string (the topic), got ${show(prompt)}`
  if (prompt.length > MAX_PROMPT)
    return `Error: prompt must be at most ${MAX_PROMPT} characters, got ${prompt.length}`
  body.prompt = prompt
  if (given(sessionID)) {
    if (typeof sessionID !== "string" || !SESSION_RE.test(sessionID))
      return `Error: sessionID must look like "ses_…" (the sessionID an earlier roundtable returned), got ${show(sessionID)}`
    body.sessionID = sessionID
  }
  if (given(agents)) {
    if (!Array.isArray(agents) || !agents.every((a) => typeof a === "string" && a.trim()))
      return `Error: agents must be a list of agent names (non-empty strings), got ${show(agents)}`
    if (agents.length < 2)
      return `Error: agents needs at least 2 agent names, got ${agents.length} (${show(agents)}); call available_agents for the names`
    if (agents.length > MAX_AGENTS)
      return `Error: agents takes at most ${MAX_AGENTS} names, got ${agents.length}`
    // Names go to the daemon verbatim: duplicates (case-folded) and surrounding whitespace are
    // refused there by the one rule shared with the control API and the CLI (its error names
    // the duplicate and lists the available agents; regression "duplicate names").
    body.agents = agents
  } else if (!given(sessionID) && !given(args.preset)) {
    return "Error: agents is required for a new roundtable (at least 2 agent names in speaking order; call available_agents for the names), got nothing. To extend a concluded roundtable pass its sessionID instead."
  }
  if (given(rounds)) {
    if (typeof rounds !== "number" || !Number.isInteger(rounds) || rounds < 1 || rounds > MAX_ROUNDS)
      return `Error: rounds must be an integer from 1 to ${MAX_ROUNDS}, got ${show(rounds)}`
    body.rounds = rounds
  }
  if (given(observer)) {
    if (typeof observer !== "string" || !observer.trim())
      return `Error: observer must be an agent name (omit it for the built-in observer), got ${show(observer)}`
    body.observer = observer.trim()
  }
  if (given(title)) {
    if (typeof title !== "string" || !title.trim())
      return `Error: title must be a non-empty string of at most ${MAX_TITLE} characters (omit it for the default), got ${show(title)}`
    if (title.length > MAX_TITLE)
      return `Error: title must be at most ${MAX_TITLE} characters, got ${title.length} characters`
    body.title = title
  }
  if (given(extendMode)) {
    if (!(CHOICES.extendMode as readonly unknown[]).includes(extendMode))
      return `Error: extendMode must be "continuation" or "new-topic", got ${show(extendMode)}`
    if (!given(sessionID))
      return `Error: extendMode applies only when extending a roundtable (with sessionID), got ${show(extendMode)} without sessionID`
    body.extendMode = extendMode
  }
  // Checked by the daemon (one rule for the tool, the control API and the CLI; its errors name
  // the field and the allowed values).
  const daemonChecked = [
    "until",
    "budget",
    "preset",
    "opening",
    "sides",
    "dryRun",
    "context",
    "protocol",
    "adaptiveThreshold",
  ]
  for (const key of daemonChecked) {
    if (given(args[key])) body[key] = args[key]
  }
  return body
}

// ---- talking to the daemon -------------------------------------------------------------------

type Reply = { status: number; data: any }

// One HTTP exchange. Throws on network errors, timeouts and aborts (name: TimeoutError/AbortError).
async function call(method: string, path: string, signal: AbortSignal, body?: unknown): Promise<Reply> {
  const resp = await fetch(controlUrl() + path, {
    method,
    headers: { "content-type": "application/json", ...(await authHeaders()) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  })
  const text = await resp.text()
  let data: any = null
  try {
    data = text ? JSON.parse(text) : null
  } catch {
    data = { error: text.slice(0, 300) }
  }
  return { status: resp.status, data }
}

// A daemon that is starting (recovering its roundtables) or restarting (stopping) answers 503
// with `starting` or `restarting` and a retry hint (docs/control-api.md): the same request
// succeeds once it is up. Returns the pause before retrying (ms), or null for any other answer.
function retryHint(reply: Reply): number | null {
  if (reply.status !== 503 || !(reply.data?.starting || reply.data?.restarting)) return null
  const s = Number(reply.data?.retryAfterS)
  return Number.isFinite(s) && s > 0 ? Math.min(s, 5) * 1000 : 1000
}

function httpError(reply: Reply): string {
  if (reply.status === 401) return tokenRejected()
  const msg = reply.data?.error
  if (typeof msg === "string") return msg.startsWith("Error:") ? msg : `Error: ${msg}`
  return `Error: roundtabled answered HTTP ${reply.status}: ${show(reply.data)}`
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms)
    signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true })
  })

function cancelInBackground(ses: string): void {
  call("POST", `/v1/roundtables/${ses}/cancel`, AbortSignal.timeout(CANCEL_TIMEOUT_MS), {
    summarize: false,
    reason: "the orchestrator's session was aborted",
  }).catch(() => {})
}

async function run(args: any, ctx: any): Promise<any> {
  const body = validate(args)
  if (typeof body === "string") return body
  const abort: AbortSignal = ctx?.abort ?? new AbortController().signal
  if (abort.aborted) return "Error: roundtable cancelled"
  body.parentSessionID = ctx?.sessionID
  body.directory = ctx?.directory
  body.toolCallID = ctx?.callID
  body.toolMessageID = ctx?.messageID

  let decided = false // set once execute has its answer; later aborts are ignored
  let ses: string | undefined
  let onAbort: () => void = () => {}
  const aborted = new Promise<string>((resolve) => {
    onAbort = () => {
      if (decided) return
      decided = true
      if (ses) cancelInBackground(ses)
      resolve("Error: roundtable cancelled")
    }
    abort.addEventListener("abort", onAbort, { once: true })
  })

  const work = async (): Promise<any> => {
    // 1. Create. Not tied to `abort`: if the session is aborted meanwhile we still learn the
    //    sessionID and cancel the roundtable instead of orphaning it.
    let created: Reply
    const createStarted = Date.now()
    for (;;) {
      try {
        created = await call("POST", "/v1/roundtables", AbortSignal.timeout(CREATE_TIMEOUT_MS), body)
      } catch (err: any) {
        if (err?.name === "TimeoutError")
          return `Error: roundtabled at ${controlUrl()} did not answer within ${CREATE_TIMEOUT_MS / 1000} s; check \`roundtabled status\` and its log`
        return notRunning(err)
      }
      // An extend while the daemon recovers the roundtable: the same request, once it is up.
      const pause = retryHint(created)
      if (pause === null || decided || Date.now() - createStarted > STARTING_MAX_MS) break
      await sleep(pause, abort)
    }
    if (created.status !== 200) return httpError(created)
    // A dry run creates nothing: the plan is the answer.
    if (body.dryRun === true) return String(created.data?.text ?? show(created.data))
    ses = String(created.data?.sessionID ?? "")
    if (!ses) return `Error: roundtabled answered without a sessionID: ${show(created.data)}`
    if (decided) {
      cancelInBackground(ses) // aborted while creating
      return "Error: roundtable cancelled"
    }
    // 2. Long-poll for the result; ride out daemon restarts for up to LOST_CONTACT_MS.
    const q = `?wait=${POLL_WAIT_S}&callID=${encodeURIComponent(ctx?.callID ?? "")}`
    let failingSince: number | null = null
    let startingSince: number | null = null
    let backoff = 500
    let lastProblem = ""
    while (!decided) {
      let reply: Reply | null = null
      try {
        const signal = AbortSignal.any([abort, AbortSignal.timeout(POLL_TIMEOUT_MS)])
        reply = await call("GET", `/v1/roundtables/${ses}/result${q}`, signal)
      } catch (err: any) {
        if (decided || abort.aborted) return "Error: roundtable cancelled"
        lastProblem = err instanceof Error ? err.message : String(err)
      }
      if (reply && reply.status === 200) {
        if (reply.data?.done) {
          // The daemon renders the result (docs/result.md) size-capped for OpenCode's tool
          // output limit; an older daemon sends only the summary.
          const output =
            typeof reply.data.output === "string"
              ? reply.data.output
              : JSON.stringify({ sessionID: ses, summary: String(reply.data.summary ?? "") })
          // The daemon's signed mark, stored with the result in this tool part: how the daemon
          // sees in this session that the result reached it (else it posts it as a message).
          const mark = reply.data.deliveryMark
          return {
            title: `Roundtable ${ses}`,
            output,
            metadata: {
              sessionID: ses,
              endReason: reply.data.endReason ?? null,
              degraded: reply.data.result?.status?.degraded ?? null,
              ...(mark && typeof mark === "object" ? { roundtabled: mark } : {}),
            },
          }
        }
        failingSince = null // still running: poll again at once
        startingSince = null
        backoff = 500
        continue
      }
      const pause = reply ? retryHint(reply) : null
      if (pause !== null) {
        // Starting (its roundtables not all loaded yet: this one is never "unknown" then) or
        // restarting: it answers, so contact is not lost; wait through it.
        failingSince = null
        backoff = 500
        startingSince ??= Date.now()
        if (Date.now() - startingSince <= STARTING_MAX_MS) {
          await sleep(pause, abort)
          continue
        }
        lastProblem = String(reply?.data?.error ?? "HTTP 503").replace(/^Error:\s*/, "")
        return `Error: roundtabled kept answering "${lastProblem}" for ${STARTING_MAX_MS / 60_000} min while roundtable ${ses} runs; its result will be posted into this session when it finishes.`
      }
      if (reply && (reply.status === 400 || reply.status === 401 || reply.status === 403)) return httpError(reply)
      if (reply) lastProblem = `HTTP ${reply.status}`
      // Transient (network error, timeout, 5xx).
      failingSince ??= Date.now()
      if (Date.now() - failingSince > LOST_CONTACT_MS)
        return `Error: lost contact with roundtabled while roundtable ${ses} runs (${lastProblem}); its result will be posted into this session when it finishes.`
      await sleep(backoff, abort)
      backoff = Math.min(backoff * 2, 5_000)
    }
    return "Error: roundtable cancelled"
  }

  try {
    return await Promise.race([work(), aborted])
  } finally {
    decided = true
    abort.removeEventListener("abort", onAbort)
  }
}

// ---- the tool --------------------------------------------------------------------------------

export default {
  description:
    "Run a roundtable: a structured debate in which the named agents speak in turn, for the given " +
    "number of rounds, in a separate child session; then an observer consolidates it. Blocks until " +
    "the debate ends and returns JSON: status (endReason; degraded; roundsCompleted/roundsPlanned; " +
    "per seat: turns answered/failed/empty/truncated/timedOut; notes), verdict (decision or null, " +
    "confidence 0-1, consensus unanimous|majority|split|none|unknown, each seat's final position " +
    "with label, confidence and changes with why, tally of stances, agreements, disagreements with " +
    "the minority's view, openQuestions, nextSteps), summary (the observer's text), usage, and " +
    "where the full transcript is. If status.degraded is true the debate did not run as asked " +
    "(failed, empty, cut or skipped turns, an early stop, a failed observer): you must tell the " +
    "user, in your own words, what status.notes says, before relaying the verdict. Call " +
    "available_agents first to learn the agent names. Seats can be given sides to argue " +
    "(sides), and dryRun previews the plan and its cost without running it. To continue a concluded roundtable, pass its " +
    "sessionID (and no agents). Problems are returned as text starting with \"Error:\" that names " +
    "the bad argument.",
  args: buildArgs(await loadZod()),
  execute: run,
}
