// `runtime.RPCTimeEvaluator` in the browser: a kernel timed next to its device, with GPU
// timestamps where the adapter offers them (from the start of the first launch's pass to the
// end of the last one's) and the wall clock around the launches and their completion otherwise.

import { RPCFault } from "./rpc_wire.js";

/** How many times a measurement that took too little time is retried with more launches. */
const MAX_GROWTH_STEPS = 64;
/** The most launches one measurement runs. */
const MAX_LAUNCHES = 100000;

/** Measures `launch(timestampWrites, checked)`, an async function that launches a kernel once
 * (`checked`: waiting for WebGPU's verdict), on `gpu`. */
export class KernelTimer {
  constructor(gpu) {
    this.gpu = gpu;
    this.useTimestamps = gpu.timestamps;
  }

  /** What the timer reads: "gpu-timestamps" or "wall-clock". */
  get kind() {
    return this.useTimestamps ? "gpu-timestamps" : "wall-clock";
  }

  /** Seconds `count` back-to-back launches take (each `checked` or not). */
  async measure(launch, count, checked = false) {
    const device = this.gpu.device;
    if (!this.useTimestamps) {
      const start = performance.now();
      for (let i = 0; i < count; i++) await launch(undefined, checked);
      await device.queue.onSubmittedWorkDone();
      this.gpu.checkAlive();
      return (performance.now() - start) / 1000;
    }
    const querySet = device.createQuerySet({ type: "timestamp", count: 2 });
    const resolved = device.createBuffer({
      size: 16,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
    const staging = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    try {
      for (let i = 0; i < count; i++) {
        const writes = { querySet };
        if (i === 0) writes.beginningOfPassWriteIndex = 0;
        if (i === count - 1) writes.endOfPassWriteIndex = 1;
        await launch(i === 0 || i === count - 1 ? writes : undefined, checked);
      }
      const encoder = device.createCommandEncoder();
      encoder.resolveQuerySet(querySet, 0, 2, resolved, 0);
      encoder.copyBufferToBuffer(resolved, 0, staging, 0, 16);
      device.queue.submit([encoder.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      const [start, end] = new BigInt64Array(staging.getMappedRange().slice(0));
      return Number(end - start) / 1e9;
    } finally {
      this.gpu.checkAlive();
      querySet.destroy();
      resolved.destroy();
      staging.destroy();
    }
  }

  /**
   * Seconds per launch for each of `repeat` measurements of `number` launches (more when a
   * measurement takes under `minRepeatMs`), after one warm-up launch, as Apache TVM's time
   * evaluator reports them.
   */
  async evaluate(launch, config) {
    const { number, repeat, minRepeatMs, limitZeroTimeIterations, cooldownIntervalMs, repeatsToCooldown } = config;
    if (number < 1 || repeat < 1) {
      throw new RPCFault("ValueError", `time evaluation needs number >= 1 and repeat >= 1, got ${number} and ${repeat}`);
    }
    // The warm-up launch is checked: the measured ones repeat it exactly.
    await this.measure(launch, 1, true);
    const results = [];
    let count = number;
    for (let r = 0; r < repeat; r++) {
      if (r > 0 && cooldownIntervalMs > 0 && r % Math.max(1, repeatsToCooldown) === 0) {
        await new Promise((resolve) => setTimeout(resolve, cooldownIntervalMs));
      }
      let seconds = await this.measure(launch, count);
      let zeros = 0;
      for (let step = 0; step < MAX_GROWTH_STEPS && seconds * 1000 < minRepeatMs && count < MAX_LAUNCHES; step++) {
        // A measurement that read no time at all says nothing of the time per launch: grow
        // by the golden ratio, a bounded number of times.
        if (seconds === 0 && ++zeros > limitZeroTimeIterations) break;
        const grown = Math.ceil(count * 1.618);
        const needed = seconds > 0 ? Math.ceil((minRepeatMs / (seconds * 1000)) * count) : grown;
        count = Math.min(MAX_LAUNCHES, Math.max(grown, needed));
        seconds = await this.measure(launch, count);
      }
      results.push(seconds / count);
    }
    return results;
  }
}
