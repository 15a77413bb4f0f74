// A vision-language architecture for the step runtime: a text model's family with its vision tower
// beside it (Qwen2.5-VL's over LlamaFamily, Gemma 3's over Gemma3Family). The tower loads after the text
// model, counts in the stored weight bytes, goes with it, and makes random weights impossible (a tower
// reads a checkpoint).
import { WebinferError } from '../core/errors.js';
import type { Runtime } from '../core/runtime.js';
import type { ModelConfig } from './config.js';
import type { WeightDType, WeightReader } from './weights.js';

/** What a family needs of its tower. */
export interface VisionTower {
  load(r: WeightReader, dtype: WeightDType): Promise<void>;
  storedWeightBytes(): number;
  destroy(): void;
}

/** The text families a tower goes beside. */
interface TextFamily {
  readonly cfg: ModelConfig;
  load(r: WeightReader, dtype: WeightDType): Promise<void>;
  initRandom(dtype: WeightDType, seed: number, std?: number): void;
  storedWeightBytes(): number;
  destroy(): void;
}

/** `Base` with a tower made by `make` (which checks the config and throws where it has no tower). The
 *  constructor takes any[] because TypeScript's mixins must; the families' is (rt, cfg). */
export function withVisionTower<T extends VisionTower, B extends new (...a: any[]) => TextFamily>(
  Base: B, make: (rt: Runtime, cfg: ModelConfig) => T) {
  return class extends Base {
    readonly tower: T;

    constructor(...a: any[]) {
      super(...a);
      this.tower = make(a[0] as Runtime, a[1] as ModelConfig);
    }

    override async load(r: WeightReader, dtype: WeightDType): Promise<void> {
      await super.load(r, dtype);
      await this.tower.load(r, dtype);
    }

    override initRandom(): void {
      throw new WebinferError(`createRandomModel: ${this.cfg.architecture} is not made with random weights (its vision tower reads a checkpoint); load one`);
    }

    override storedWeightBytes(): number {
      return super.storedWeightBytes() + this.tower.storedWeightBytes();
    }

    override destroy(): void {
      super.destroy();
      this.tower.destroy();
    }
  };
}
