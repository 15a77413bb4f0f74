// mergeAttnStates (SPEC §4): validation, then the merge kernel.
import { check, fmt, shapeStr } from '../errors.js';
import type { Engine } from '../engine.js';
import type { Tensor } from '../tensor.js';
import { encodeMerge } from '../kernels/merge_states.js';
import { checkTensor } from './sdpa.js';

export function mergeAttnStates(engine: Engine, oA: Tensor, lseA: Tensor, oB: Tensor, lseB: Tensor): { out: Tensor; lse: Tensor } {
  const op = 'mergeAttnStates';
  engine.assertAlive(op);
  checkTensor(oA, op, 'oA');
  checkTensor(lseA, op, 'lseA');
  checkTensor(oB, op, 'oB');
  checkTensor(lseB, op, 'lseB');
  check(oA.shape.length === 3, op, 'oA', 'shape [T, H, Dv]', shapeStr(oA.shape));
  const [T, H, Dv] = oA.shape;
  check(['f32', 'f16', 'bf16'].includes(oA.dtype), op, 'oA.dtype', "'f32', 'f16' or 'bf16'", fmt(oA.dtype));
  check(oB.shape.length === 3 && oB.shape[0] === T && oB.shape[1] === H && oB.shape[2] === Dv, op, 'oB',
    `shape [T=${T}, H=${H}, Dv=${Dv}] (that of oA)`, shapeStr(oB.shape));
  check(oB.dtype === oA.dtype, op, 'oB.dtype', `'${oA.dtype}' (the dtype of oA)`, fmt(oB.dtype));
  for (const [name, l] of [['lseA', lseA], ['lseB', lseB]] as const) {
    check(l.shape.length === 2 && l.shape[0] === H && l.shape[1] === T, op, name, `shape [H=${H}, T=${T}]`, shapeStr(l.shape));
    check(l.dtype === 'f32', op, `${name}.dtype`, "'f32'", fmt(l.dtype));
  }
  const out = engine.emptyTensor([T, H, Dv], oA.dtype);
  const lse = engine.emptyTensor([H, T], 'f32');
  encodeMerge(engine, { T, H, Dv, inDtype: oA.dtype as 'f32' | 'f16' | 'bf16', oA, lseA, oB, lseB, nParts: 2 }, out, lse);
  return { out, lse };
}
