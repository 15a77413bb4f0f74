// GPU tensors and the buffer pool behind them.
import { DTYPE_BYTES, decodeBf16, decodeF16, decodeFp8e4m3, type DType } from './dtype.js';
import { WebinferError, check, numel, shapeStr } from './errors.js';

/** What a tensor needs from its engine (kept narrow so tensors do not depend on the engine module). */
export interface TensorHost {
  readBuffer(buffer: GPUBuffer, byteLength: number): Promise<ArrayBuffer>;
  releaseBuffer(buffer: GPUBuffer): void;
  assertAlive(op: string): void;
}

/** Bytes a tensor of this shape and dtype occupies, rounded up to whole 4-byte words. */
export function tensorByteLength(shape: readonly number[], dtype: DType): number {
  return Math.ceil((numel(shape) * DTYPE_BYTES[dtype]) / 4) * 4;
}

export class Tensor {
  readonly shape: readonly number[];
  readonly dtype: DType;
  /** Bytes holding the elements, padded to a multiple of 4; the buffer itself may be larger (pooled). */
  readonly byteLength: number;
  private buf: GPUBuffer | null;

  /** owned: false for a view of another tensor's buffer (its destroy() only forgets the buffer). */
  constructor(private readonly host: TensorHost, buffer: GPUBuffer, shape: readonly number[], dtype: DType, private readonly owned = true) {
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
    this.byteLength = tensorByteLength(shape, dtype);
    this.buf = buffer;
  }

  get buffer(): GPUBuffer {
    if (!this.buf) throw new WebinferError(`tensor ${shapeStr(this.shape)} ${this.dtype}: used after destroy()`);
    return this.buf;
  }

  get destroyed(): boolean {
    return this.buf === null;
  }

  get numel(): number {
    return numel(this.shape);
  }

  /** Raw contents: Float32Array, Int32Array, Uint32Array, Uint16Array (f16/bf16 bits) or Uint8Array (fp8). */
  async toArray(): Promise<Float32Array | Int32Array | Uint32Array | Uint16Array | Uint8Array> {
    this.host.assertAlive('Tensor.toArray');
    const bytes = await this.host.readBuffer(this.buffer, this.byteLength);
    const n = this.numel;
    switch (this.dtype) {
      case 'f32': return new Float32Array(bytes, 0, n);
      case 'i32': return new Int32Array(bytes, 0, n);
      case 'u32': return new Uint32Array(bytes, 0, n);
      case 'f16': case 'bf16': return new Uint16Array(bytes, 0, n);
      case 'fp8e4m3': return new Uint8Array(bytes, 0, n);
    }
  }

  /** Reads back and decodes to f32 (integers are converted as numbers). */
  async toFloat32(): Promise<Float32Array> {
    const raw = await this.toArray();
    switch (this.dtype) {
      case 'f32': return raw as Float32Array;
      case 'f16': return decodeF16(raw as Uint16Array);
      case 'bf16': return decodeBf16(raw as Uint16Array);
      case 'fp8e4m3': return decodeFp8e4m3(raw as Uint8Array);
      default: return Float32Array.from(raw as Int32Array | Uint32Array);
    }
  }

  /** Returns the buffer to the engine's pool; later use of this tensor throws. Idempotent. */
  destroy(): void {
    if (!this.buf) return;
    if (this.owned) this.host.releaseBuffer(this.buf);
    this.buf = null;
  }

  /**
   * The first elements of this tensor's buffer seen with another shape (no copy; at most as many
   * elements, the same dtype): a model's activations, sized for its largest step, viewed at this
   * step's token count. The view never frees the buffer; the tensor it came from must outlive it.
   */
  view(shape: readonly number[]): Tensor {
    const n = numel(shape);
    if (!shape.every((d) => Number.isInteger(d) && d > 0) || n > this.numel) {
      throw new WebinferError(`Tensor.view: shape: expected positive integers with at most ${this.numel} elements (of ${shapeStr(this.shape)}), got ${shapeStr(shape)}`);
    }
    return new Tensor(this.host, this.buffer, shape, this.dtype, false);
  }
}

/** The usage of buffers that only GPU commands touch (BufferPool.release hands them back at once). */
export const GPU_ONLY_USAGE = (): number => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC;

/**
 * Reuses freed buffers by size class. A released buffer only becomes reusable after the commands
 * recorded so far are submitted (`onSubmit`): queue.writeBuffer runs on the queue timeline ahead
 * of an unsubmitted encoder, so handing it out earlier could overwrite data those commands read.
 * Buffers of GPU_ONLY_USAGE, which nothing writes from the host, are the exception (see release).
 */
export class BufferPool {
  private readonly free = new Map<string, GPUBuffer[]>();
  private deferred: GPUBuffer[] = [];
  private freeBytes = 0;
  /** Buffers created (pool misses) and reused (hits), and bytes handed out in all, for tests and notes. */
  readonly stats = { created: 0, reused: 0, acquiredBytes: 0 };
  /** Told of every acquisition's usage (the runtime, while it captures a step graph). */
  onAcquire: ((usage: number) => void) | null = null;

  /** maxSize: the largest buffer a size class may round up to (the device's largest bindable buffer). */
  constructor(private readonly device: GPUDevice, private readonly maxFreeBytes = 512 * 1024 * 1024,
              private readonly create: (d: GPUBufferDescriptor) => GPUBuffer = (d) => device.createBuffer(d),
              private readonly maxSize = Infinity) {}

  /** Size classes: multiples of 256 B up to 64 KiB, then 8 steps per power of two (≤ 12.5% slack). */
  static sizeClass(bytes: number): number {
    const b = Math.max(16, bytes);
    if (b <= 65536) return Math.ceil(b / 256) * 256;
    const step = 2 ** (Math.floor(Math.log2(b)) - 3);
    return Math.ceil(b / step) * step;
  }

  acquire(bytes: number, usage: number, label?: string): GPUBuffer {
    // A size class never rounds a buffer that fits the device past what it can create or bind whole.
    const size = Math.max(Math.min(BufferPool.sizeClass(bytes), this.maxSize), Math.ceil(bytes / 4) * 4);
    const key = `${usage}:${size}`;
    this.onAcquire?.(usage);
    const list = this.free.get(key);
    const hit = list?.pop();
    this.stats.acquiredBytes += size;
    if (hit) {
      this.freeBytes -= size;
      this.stats.reused++;
      return hit;
    }
    this.stats.created++;
    return this.create({ size, usage, label });
  }

  /**
   * Hands a buffer back. Most wait for the submit of the recorded work: a host write (queue.writeBuffer)
   * by their next user would land before the commands already recorded. Buffers of GPU_ONLY_USAGE
   * (Runtime.gpuScratch: no COPY_DST, no MAP_*, so nothing writes them from the host or maps them, and
   * no host-written buffer shares their free lists) go back at once: their users record GPU commands
   * alone, which the GPU runs in order, so the next operation of the same recording may take them.
   */
  release(buffer: GPUBuffer): void {
    if (buffer.usage === GPU_ONLY_USAGE()) this.releaseNow(buffer);
    else this.deferred.push(buffer);
  }

  private releaseNow(buffer: GPUBuffer): void {
    const key = `${buffer.usage}:${buffer.size}`;
    let list = this.free.get(key);
    if (!list) this.free.set(key, (list = []));
    list.push(buffer);
    this.freeBytes += buffer.size;
  }

  /**
   * Takes this very buffer off its free list, as acquire would have handed it out; false when it is not
   * free (held by someone, or destroyed by trim). A replayed step graph takes its scratch back so.
   */
  take(buffer: GPUBuffer): boolean {
    const list = this.free.get(`${buffer.usage}:${buffer.size}`);
    const i = list ? list.lastIndexOf(buffer) : -1;
    if (i < 0) return false;
    list!.splice(i, 1);
    this.freeBytes -= buffer.size;
    return true;
  }

  onSubmit(): void {
    for (const b of this.deferred) this.releaseNow(b);
    this.deferred = [];
    if (this.freeBytes > this.maxFreeBytes) this.trim();
  }

  /**
   * Destroys those of `buffers` that are free or wait for a submit (the others are in use), so that
   * none is handed out again: after a failed allocation any buffer created meanwhile may be invalid.
   */
  discard(buffers: ReadonlySet<GPUBuffer>): void {
    for (const list of this.free.values()) {
      for (let i = list.length - 1; i >= 0; i--) {
        if (!buffers.has(list[i])) continue;
        this.freeBytes -= list[i].size;
        list[i].destroy();
        list.splice(i, 1);
      }
    }
    for (const b of this.deferred) if (buffers.has(b)) b.destroy();
    this.deferred = this.deferred.filter((b) => !buffers.has(b));
  }

  /** Destroys every free buffer. */
  trim(): void {
    for (const list of this.free.values()) for (const b of list) b.destroy();
    this.free.clear();
    this.freeBytes = 0;
  }

  destroyAll(): void {
    this.trim();
    for (const b of this.deferred) b.destroy();
    this.deferred = [];
  }
}

/** Asserts an argument is a live Tensor (a clear error for anything else, or a destroyed one). */
export function checkTensor(t: unknown, op: string, arg: string): asserts t is Tensor {
  check(t instanceof Tensor, op, arg, 'a Tensor', t);
  check(!t.destroyed, op, arg, 'a live tensor', 'a destroyed tensor');
}
