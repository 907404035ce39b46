/** `npm run bench`: every benchmark prints its figures side by side with its target. */
import { benchLoop } from "./loop.js";

const fmt = (ms: number) => `${ms.toFixed(3)} ms`;

const loop = await benchLoop();
console.log("bench/loop");
console.log(
  `  (a) per iteration: loop ${fmt(loop.iterationMs)}, bare ${fmt(loop.bareIterationMs)}, ` +
    `loop overhead ${fmt(loop.overheadMs)} (target < 0.5 ms) ${loop.overheadMs < 0.5 ? "PASS" : "FAIL"}`,
);
console.log(
  `  (b) first chunk: AgentLoop ${fmt(loop.firstChunkLoopMs)}, bare openai SDK ${fmt(loop.firstChunkSdkMs)}, ` +
    `ratio ${loop.firstChunkRatio.toFixed(3)}x (target <= 1.05x) ${loop.firstChunkRatio <= 1.05 ? "PASS" : "FAIL"}`,
);
