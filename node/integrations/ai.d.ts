// agentbreaker/ai: a Monitor on the Vercel AI SDK's agent loop (ai 5, 6, 7). See ai.js.
import type { ModelMessage, PrepareStepFunction, StepResult, StopCondition } from 'ai'
import type { Monitor, MonitorConfig, RuleVerdict, Verdict } from '../index.js'

/** The options the SDK passes to `prepareStep`. */
export type PrepareStepOptions = Parameters<PrepareStepFunction<any>>[0]

/** What `agentBreaker()` takes: a Monitor, or the Monitor's settings, and your own callbacks. */
export interface AgentBreakerOptions extends MonitorConfig {
  /** The Monitor to feed (else a new one from the settings). */
  monitor?: Monitor
  /**
   * Every run's task id in the Monitor (default: a new id per run). Each run still starts from
   * zero (the task is closed first); runs of the guard at once then share the task.
   */
  taskId?: string
  /**
   * 'stop' (default): the run ends normally after the halting step; 'throw': `stopWhen` throws
   * the AgentHaltedError (generateText rejects with it, a stream's iteration throws it).
   */
  onHalt?: 'stop' | 'throw'
  /**
   * The most steps (default 20, ToolLoopAgent's default; `null` or `Infinity`: no limit). The
   * guard's `stopWhen` replaces the SDK's default condition, so it carries the step limit.
   */
  maxSteps?: number | null
  /** Your own stop conditions: the guard's `stopWhen` is also true when one of them is. */
  stopWhen?: StopCondition<any> | Array<StopCondition<any>>
  /** Your own prepareStep: it runs first; the nudge is added to the messages it returns. */
  prepareStep?: (options: PrepareStepOptions) => unknown
  /** Your own step callback: it runs after the guard has fed the step to the Monitor. */
  onStepEnd?: (step: StepResult<any>) => PromiseLike<void> | void
  /** The same as `onStepEnd` (the name ai 5 and 6 use). */
  onStepFinish?: (step: StepResult<any>) => PromiseLike<void> | void
}

/** One run of a guard, as `runOf()` answers it. */
export interface AgentBreakerRun {
  /** The run's task id in the Monitor. */
  taskId: string
  /** The run's last warn or halt verdict (null while it is healthy). */
  verdict: RuleVerdict | null
  /** The halt verdict, once the Monitor halted the run. */
  halt: RuleVerdict | null
  halted: boolean
}

/**
 * The guard: spread it into `generateText`, `streamText` or `new ToolLoopAgent` (`...guard` gives
 * exactly `stopWhen`, `prepareStep`, `onStepEnd` and `onStepFinish`). Every run (each
 * `generateText`/`streamText` call, each `agent.generate()`/`agent.stream()`) is a task of its own
 * in the Monitor, with its own nudges and halt. `R`: what your own `prepareStep` returns.
 */
export declare class AgentBreaker<R = undefined> {
  /** True once the Monitor halted the run (onHalt 'throw': throws), at `maxSteps`, or when one of yours is. */
  readonly stopWhen: StopCondition<any>
  /** Yours (if any), with the nudges of the warnings since the last step after the messages. */
  readonly prepareStep: (options: PrepareStepOptions) => Promise<Awaited<R> | { messages: Array<ModelMessage> }>
  /** Feeds a finished step to the Monitor (ai 7's name). */
  readonly onStepEnd: (step: StepResult<any>) => Promise<void>
  /** The same function (ai 5 and 6's name; ai 7 calls only `onStepEnd` when both are given). */
  readonly onStepFinish: (step: StepResult<any>) => Promise<void>
  /** The Monitor. */
  get monitor(): Monitor
  /** The latest run's task id in the Monitor (before the first run: the id it will have). */
  get taskId(): string
  /** The latest run's last warn or halt verdict (null while it is healthy); a halted run ends with its halt. */
  get verdict(): RuleVerdict | null
  /** The latest run's halt verdict, once the Monitor halted it. */
  get halt(): RuleVerdict | null
  /** The latest run was halted. */
  get halted(): boolean
  /** Events the Monitor refused even as their JSON-safe copy: not watched (a warning the first time). */
  get observeErrors(): number
  /** The run whose steps these are (`result.steps`, `await stream.steps`); null for steps of no run of this guard. */
  runOf(steps: ReadonlyArray<StepResult<any>>): AgentBreakerRun | null
  /** Closes the task of every run of the guard: the next run starts from zero with a new task id. */
  reset(): void
}

/** The guard for one run (see `AgentBreaker`); with a `prepareStep` of yours, typed by what it returns. */
export declare function agentBreaker<R>(
  options: AgentBreakerOptions & { prepareStep: (options: PrepareStepOptions) => R },
): AgentBreaker<R>
export declare function agentBreaker(options?: AgentBreakerOptions): AgentBreaker

/** A StopCondition true once `monitor` has halted a task (`taskId`, or any). */
export declare function breakerStopWhen(monitor: Monitor, options?: { taskId?: string }): StopCondition<any>

/** The Monitor events of one finished step, in order (what `onStepEnd` feeds). */
export declare function stepEvents(step: StepResult<any>): Array<Record<string, unknown>>

export type { Verdict }
