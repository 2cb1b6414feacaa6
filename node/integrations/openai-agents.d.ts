// agentbreaker/openai-agents: a Monitor on an OpenAI Agents SDK run (@openai/agents). See openai-agents.js.
import type { Agent, CallModelInputFilter, RunContext, Runner } from '@openai/agents'
import type { Monitor, MonitorConfig, RuleVerdict } from '../index.js'

/** The SDK's text for a tool that threw (its default errorFunction): a result with it is a failed call. */
export declare const SDK_TOOL_ERROR: 'An error occurred while running the tool. Please try again.'

/** What `agentBreaker()` takes: a Monitor, or the Monitor's settings. */
export interface AgentBreakerOptions extends MonitorConfig {
  /** The Monitor to feed (else a new one from the settings). */
  monitor?: Monitor
  /** Every run's task id in the Monitor (default: a new id per run). */
  taskId?: string
}

/** A tool's `errorFunction` (the signature `tool({ errorFunction })` takes). */
export type BreakerErrorFunction = (
  context: RunContext<any>,
  error: unknown,
  details?: { toolCall?: { callId?: string } },
) => Promise<string>

/** What `runOptions()` adds to your run options. */
export interface BreakerRunOptions<TContext> {
  /** Aborted with the AgentHaltedError when the Monitor halts the run (combined with a signal of yours). */
  signal: AbortSignal
  /** Passes the nudges of warnings to the model (after a filter of yours). */
  callModelInputFilter: CallModelInputFilter<any>
  /** Your context, or a new object: it ties the lifecycle events to the run. */
  context: TContext
}

export declare class AgentBreaker {
  /** The Monitor. */
  get monitor(): Monitor
  /** The latest warn or halt verdict of any run (null before the first). */
  get verdict(): RuleVerdict | null
  /** The verdict that halted the latest halted run (null if none was). */
  get halt(): RuleVerdict | null
  /** Listens to the lifecycle events of a Runner (every run of it) or of an Agent. */
  attach(target: Runner | Agent<any, any>): this
  /** Stops listening to `target` (to every target when none is given). */
  detach(target?: Runner | Agent<any, any>): this
  /**
   * The options of one run: yours, with `signal`, `callModelInputFilter` and `context`. A halt
   * aborts the run: `run()` rejects with the AgentHaltedError (`err.code === 'HALTED'`,
   * `err.verdict`); a streamed run ends with `cancelled` (and `breaker.halt` says why).
   */
  runOptions<T extends object = {}>(
    options?: T,
  ): Omit<T, 'signal' | 'callModelInputFilter' | 'context'> &
    BreakerRunOptions<T extends { context: infer C } ? (C extends null | undefined ? {} : C) : {}>
  /**
   * A tool's `errorFunction` that records the error of a failed call, then answers with `mine`
   * (if given) or the SDK's default text.
   */
  errorFunction(mine?: (context: RunContext<any>, error: unknown, details?: any) => string | Promise<string>): BreakerErrorFunction
}

/** A breaker for OpenAI Agents SDK runs. */
export declare function agentBreaker(options?: AgentBreakerOptions): AgentBreaker
