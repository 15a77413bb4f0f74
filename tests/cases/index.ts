// Every test case, in the order the runners list them.
import { engineCases } from './engine.cases';
import { faultCases } from './faults.cases';
import { mergeCases } from './merge.cases';
import { mlaCases } from './mla.cases';
import { pagedCases } from './paged.cases';
import { planCases } from './plan.cases';
import { sdpaFlashCases } from './sdpa_flash.cases';
import { sdpaNaiveCases } from './sdpa_naive.cases';
import { tensorCases } from './tensor.cases';
import { validationCases } from './validation.cases';
import { gemmCases } from './gemm.cases';
import { opsCases } from './ops.cases';
import { moeCases } from './moe.cases';
import { modelCases } from './model.cases';
import { archNopeLongropeCases } from './arch_nope_longrope.cases';
import { deepseekFuzzCases } from './deepseek_fuzz.cases';
import { quantCases } from './quant.cases';
import { quantGroupCases } from './quant_group.cases';
import { serveCases } from './serve.cases';
import { speculativeCases } from './speculative.cases';
import { layerApiCases } from './layer_api.cases';
import { whisperCases } from './whisper.cases';
import { decoderCases } from './decoders.cases';
import { encoderCases } from './encoder.cases';
import { archCases as archQwen3MoeCases } from './arch_qwen3moe.cases';
import { archGemma3Cases } from './arch_gemma3.cases';
import { visionCases } from './vision.cases';
import { ggufArchCases } from './gguf_arch.cases';
import { archQwenVLCases } from './arch_qwen_vl.cases';
import { archGemma3VisionCases } from './arch_gemma3_vision.cases';
import { archLfm2Cases } from './arch_lfm2.cases';
import type { TestCase } from './harness';

export type { CaseContext, TestCase } from './harness';
export * as webinfer from '../../src/index';

export const allCases: TestCase[] = [
  ...engineCases, ...tensorCases, ...validationCases, ...sdpaNaiveCases, ...sdpaFlashCases, ...mergeCases, ...pagedCases, ...mlaCases, ...planCases, ...layerApiCases,
  ...gemmCases,
  ...quantCases,
  ...quantGroupCases,
  ...opsCases,
  ...moeCases,
  ...modelCases,
  ...archNopeLongropeCases,
  ...deepseekFuzzCases,
  ...faultCases,
  ...serveCases,
  ...speculativeCases,
  ...whisperCases,
  ...decoderCases,
  ...encoderCases,
  ...archQwen3MoeCases,
  ...archGemma3Cases,
  ...visionCases,
  ...ggufArchCases,
  ...archQwenVLCases,
  ...archGemma3VisionCases,
  ...archLfm2Cases,
];
