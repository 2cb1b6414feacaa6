'use strict'
// agentbreaker/otel: a Monitor's halts, warnings, tool calls, spend and steps per task as
// OpenTelemetry metrics. The meter provider here collects in memory so that this prints what it
// recorded; in an application, set up your exporter (OTLP, Prometheus) and call instrument(monitor).
//
//   node examples/otel.js

const { MeterProvider, MetricReader } = require('@opentelemetry/sdk-metrics')
const { Monitor } = require('agentbreaker')
const { instrument } = require('agentbreaker/otel')

class InMemoryReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

async function main() {
  const reader = new InMemoryReader()
  const monitor = new Monitor()
  instrument(monitor, { meterProvider: new MeterProvider({ readers: [reader] }) })

  // an agent running the same failing command: warned at its third step, halted at its fifth
  for (let i = 0; i < 6; i++) {
    monitor.observe({ type: 'assistant', text: 'Let me run the tests again.' })
    monitor.observe({ type: 'usage', model: 'claude-sonnet-4-5', usage: { input_tokens: 2000, output_tokens: 150 } })
    monitor.observe({ type: 'tool_use', name: 'Bash', id: `t${i}`, input: { command: 'pytest -q' } })
    monitor.observe({ type: 'tool_result', id: `t${i}`, ok: false, text: '1 failed, 41 passed in 0.52s' })
  }

  const { resourceMetrics } = await reader.collect()
  for (const metric of resourceMetrics.scopeMetrics[0].metrics) {
    for (const point of metric.dataPoints) {
      const value = typeof point.value === 'number' ? point.value : `count=${point.value.count} sum=${point.value.sum}`
      console.log(`${metric.descriptor.name}${JSON.stringify(point.attributes)} ${value}`)
    }
  }
}

main()
// agentbreaker.halts{"reason":"repeated_step"} 1
// agentbreaker.warnings{"reason":"repeated_step"} 1
// agentbreaker.warnings{"reason":"fail_streak"} 1
// agentbreaker.tool_calls{} 5
// agentbreaker.spend{} 4.125
// agentbreaker.task.steps{"outcome":"halted"} count=1 sum=5
