// Replays benchmarks/engine_replay.py's recording (length-prefixed CBOR items: [phase, query file,
// SurrealQL text, params]) on a fresh store at the URL given, request by request and in order. Writes
// JSON: each request's [phase, file, wall ms] and, per file, the first statement that failed.
import { readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { createNodeEngines } from "@surrealdb/node";
import { CborCodec, Surreal } from "surrealdb";

const [recording, url, out] = process.argv.slice(2);
const bytes = readFileSync(recording);
const db = new Surreal({ engines: createNodeEngines() });
await db.connect(url);
await db.use({ namespace: "kg", database: "kg" });

const jobs = [];
const firstError = {};
let offset = 0;
while (offset < bytes.length) {
  const length = bytes.readUInt32BE(offset);
  const [phase, name, text, params] = CborCodec.DEFAULT.decode(bytes.subarray(offset + 4, offset + 4 + length));
  offset += 4 + length;
  const start = performance.now();
  const responses = await db.query(text, params).responses();
  jobs.push([phase, name, performance.now() - start]);
  // the statement that failed, not those its failed transaction cancelled
  const failed = responses.filter((r) => !r.success);
  const cause = failed.find((r) => !String(r.error?.message).includes("not executed")) ?? failed[0];
  if (cause) firstError[name] ??= String(cause.error?.message ?? JSON.stringify(cause));
}

await db.close();
writeFileSync(out, JSON.stringify({ jobs, first_error: firstError }));
process.exit(0); // the engine's threads would keep Node alive after close
