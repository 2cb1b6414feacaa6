// Type-checked (never run) with `tsc --noEmit --strict -p test/types`: a small program against
// index.d.ts, plus `@ts-expect-error` lines that must stay errors.
import {
  analyze,
  BudgetBreaker,
  configFromEnv,
  ExitStrategy,
  FailureBreaker,
  fingerprint,
  FixPlan,
  Loop,
  ManualClock,
  profile,
  profileNames,
  StagnationBreaker,
  SystemClock,
} from '../..'
import type {
  AgentBreakerError,
  Analysis,
  CircuitState,
  ErrorCode,
  ExitReason,
  FailureStatus,
  Halt,
  HaltSlug,
  LoopDecision,
  Permission,
  ProfileName,
  StateChangeEvent,
  WarningEvent,
} from '../..'

async function failureBreaker(): Promise<void> {
  const clock = new ManualClock(0)
  const breaker = new FailureBreaker({ failureThreshold: 5, cooldownMs: 30_000 }, clock)
  const status: FailureStatus = breaker.getStatus()
  const state: CircuitState = status.state
  const openedAt: number | null = status.openedAt
  const permission: Permission = breaker.shouldAllowOperation()
  const allowed: boolean = permission.allowed
  const message: string | null = permission.message
  breaker.recordFailure('Path not found: ServerScriptService.MainScript')
  breaker.recordSuccess()
  clock.advance(1000)
  clock.set(2000)

  breaker
    .on('stateChange', (event) => {
      const change: StateChangeEvent = event
      const to: CircuitState = change.to
      void to
    })
    .on('warning', (event: WarningEvent) => void event.message)

  // call() keeps the function's result type, for sync and async functions and their arguments.
  const length: number = await breaker.call((text: string) => text.length, 'hello')
  const fetched: { ok: boolean } = await breaker.call(async (ok: boolean) => ({ ok }), true)
  try {
    await breaker.call(async () => 'never')
  } catch (error) {
    const code: ErrorCode = (error as AgentBreakerError).code
    if (code === 'CIRCUIT_OPEN') void code
  }
  void [state, openedAt, allowed, message, length, fetched, breaker.state, breaker.listenerErrors]
  void new FailureBreaker(null, new SystemClock())
  void new FailureBreaker()

  // @ts-expect-error a misspelt config key
  void new FailureBreaker({ failureTreshold: 5 })
  // @ts-expect-error FailureBreakers emit no halt events
  breaker.on('halt', () => undefined)
  // @ts-expect-error the error text is a string
  breaker.recordFailure(42)
  // @ts-expect-error the arguments must fit the function
  void breaker.call((n: number) => n, 'not a number')
  // @ts-expect-error states are upper case
  const lower: CircuitState = 'open'
  void lower
}

function stagnation(): void {
  const breaker = new StagnationBreaker({ noProgressThreshold: 3 })
  breaker.recordProgress({ filesChanged: 1, testsPassing: 4, outputLength: 900 })
  breaker.recordError('rate limited', { transient: true })
  const decision = breaker.check()
  const keepGoing: boolean = decision.allowContinue
  const counts: Record<string, number> = breaker.getStatus().errorCounts
  breaker.restore(breaker.snapshot())
  breaker.recordStep({ action: 'bash: pytest -q', result: '3 failed', failed: true })
  const coding = profile('coding-agent')
  if (coding !== null) void new StagnationBreaker(coding.stagnation).recordStep({ action: 'read a' })
  const names: ProfileName[] = profileNames()
  void names
  breaker.on('stateChange', (event) => void event.reason)
  void [keepGoing, counts]
  // @ts-expect-error a step needs its action
  breaker.recordStep({ result: 'ok' })
  // @ts-expect-error transient is a boolean
  breaker.recordError('x', { transient: 'yes' })
}

function budget(): void {
  const fromEnv = configFromEnv({ AGENTBREAKER_TOOL_CAP: '20' })
  const cap: number = fromEnv.config.maxToolCallsPerTask
  const budget = new BudgetBreaker({ ...fromEnv.config, maxIdleSecs: 60 })
  budget.ingest({ type: 'heartbeat', taskId: 'research', phase: 'starting' })
  const halt: Halt | null = budget.ingest({ type: 'tool_use', name: 'web_fetch' })
  if (halt !== null && halt.kind === 'ToolCallLimit') {
    const over: number = halt.actual - halt.limit
    void over
  }
  const slugs: HaltSlug[] = budget.tick().map((h) => h.slug)
  budget.on('halt', (event) => void event.halt.taskId)
  void [cap, slugs, configFromEnv()]
  // @ts-expect-error not a slug
  const slug: HaltSlug = 'tool-call-limit'
  void slug
}

function strategies(): void {
  const analysis: Analysis = analyze('All tasks complete. 42 tests passed.')
  const strategy = new ExitStrategy({ type: 'composite', mode: 'any', members: [{ type: 'auto' }, { type: 'circuit_breaker' }] })
  const reason: ExitReason | null = strategy.shouldExit(analysis, 'CLOSED').reason
  const plan = FixPlan.fromMarkdown('- [ ] parse\n- [x] lex', 2)
  const current: number | null = plan.getStatus().currentStep
  plan.on('warning', (event) => void event.message)
  void [reason, current, fingerprint('Error at 12:34', 'normalized')]
  // @ts-expect-error strategies need a type
  void new ExitStrategy({ threshold: 70 })
}

function agentLoop(): void {
  const loop = new Loop({ maxIterations: 10, budget: { maxToolCallsPerTask: 5 } })
  const decision: LoopDecision = loop.observe({ output: 'Refactored the parser.', filesChanged: 2, events: [{ type: 'tool_use', name: 'edit' }] })
  if (decision.action === 'exit') {
    const outcome: 'success' | 'failure' | null = decision.outcome
    void outcome
  }
  loop.on('halt', (event) => void event.halt.slug).on('stateChange', (event) => void event.to)
  void loop.getStatus().budget
  // @ts-expect-error output is required
  loop.observe({ filesChanged: 1 })
}

void [failureBreaker, stagnation, budget, strategies, agentLoop]
