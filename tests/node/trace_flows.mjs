// Chrome DevTools' own trace engine (the performance panel's parser, published on npm as
// @paulirish/trace_engine) on a trace file: how many flows (request arrows) it draws, and how many
// events each binds. Prints one JSON line: {"flows": [n_events, ...], "slices": n}.
import fs from 'node:fs';
import * as Trace from '@paulirish/trace_engine/models/trace/trace.js';

const {traceEvents} = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(traceEvents);
const parsed = model.parsedTrace();
const flows = parsed.data.Flows.flows.map(flow => flow.length);
const slices = traceEvents.filter(e => e.ph === 'X').length;
console.log(JSON.stringify({flows, slices}));
