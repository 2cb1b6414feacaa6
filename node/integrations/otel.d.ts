// agentbreaker/otel: OpenTelemetry metrics and span events for a Monitor or a breaker. See otel.js.
import type { MeterProvider } from '@opentelemetry/api'
import type { BudgetBreaker, ExitStrategy, FailureBreaker, Loop, Monitor, StagnationBreaker } from '../index.js'

/** The instrumentation scope (the meter's name). */
export declare const SCOPE: 'agentbreaker'
export declare const SPAN_EVENT_WARNING: 'agentbreaker.warning'
export declare const SPAN_EVENT_HALT: 'agentbreaker.halt'
export declare const SPAN_EVENT_STATE_CHANGE: 'agentbreaker.state_change'

/** One metric of the vocabulary (docs/observability.md), from the core's `metricDefinitions()`. */
export interface MetricDefinition {
  name: string
  instrument: 'counter' | 'histogram'
  unit: string
  description: string
  buckets?: number[]
}
export declare const VOCABULARY: readonly MetricDefinition[]

export type Instrumentable = Monitor | FailureBreaker | StagnationBreaker | BudgetBreaker | Loop | ExitStrategy

export interface InstrumentOptions {
  /**
   * Default: the global meter provider, looked up at each record (one the application sets
   * after `instrument()` is used from then on).
   */
  meterProvider?: MeterProvider
  /** Add the `task` attribute (one series per task; at most 1000 task values). Default false. */
  task?: boolean
  /** Warnings, halts and state changes as events on the active span. Default true. */
  spanEvents?: boolean
  /** The `breaker` attribute of state changes. Default: the kind of object. */
  breaker?: string
}

export declare class Instrumentation {
  readonly target: Instrumentable
  readonly breaker: string
  /** False once uninstrumented, or replaced by a later `instrument()` of the same Monitor. */
  get active(): boolean
  /** Records and span events that threw: contained (the agent goes on), the first one a process warning `AGENTBREAKER_OTEL`. */
  get errors(): number
  /** Stops the metrics and span events of this instrumentation (idempotent). */
  uninstrument(): void
  /** A Monitor's only: observes the tasks still open as `outcome="ended"`. */
  endTasks?: () => void
}

/**
 * Reports the target's metrics to OpenTelemetry and its warnings and halts as span events. A
 * Monitor has one recorder: a second `instrument()` of it replaces the first.
 */
export declare function instrument(target: Instrumentable, options?: InstrumentOptions): Instrumentation
