// Misspelt options are refused with the one meant (issue 29: a `maxTokens` typo for `maxNewTokens` was
// ignored and the call ran with the default): checkKeys and its did-you-mean.
import { describe, expect, it } from 'vitest';
import { checkKeys, didYouMean } from '../../src/core/errors';

describe('checkKeys: an unknown option is refused with the one meant', () => {
  const GENERATE = ['maxNewTokens', 'temperature', 'topK', 'topP', 'seed', 'stopTokens', 'onToken', 'signal'];
  it('names the key, the closest known one and all of them', () => {
    expect(() => checkKeys('Model.generate', 'o', { maxTokens: 5 }, GENERATE)).toThrow(
      "Model.generate: o: expected only the options maxNewTokens, temperature, topK, topP, seed, stopTokens, onToken, signal, got 'maxTokens' (did you mean 'maxNewTokens'?)");
    expect(() => checkKeys('op', 'o.kvCache', { blocks: 1 }, ['numBlocks', 'blockSize', 'dtype'])).toThrow("got 'blocks' (did you mean 'numBlocks'?)");
    expect(() => checkKeys('op', 'o', { zzz: 1 }, GENERATE)).toThrow(/got 'zzz'$/);
    // An undefined value is still a misspelt key.
    expect(() => checkKeys('op', 'o', { temprature: undefined }, GENERATE)).toThrow("got 'temprature' (did you mean 'temperature'?)");
    expect(() => checkKeys('op', 'o', { seed: 1, topK: undefined }, GENERATE)).not.toThrow();
  });
  it('did you mean: case, edits within a third of the word, containment; nothing far', () => {
    const LOAD = ['config', 'weights', 'dtype', 'kvCache', 'onProgress', 'maxTokensPerStep', 'maxSeqsPerStep', 'allowNonFinite'];
    expect(didYouMean('kvcache', LOAD)).toBe('kvCache');
    expect(didYouMean('onProgres', LOAD)).toBe('onProgress');
    expect(didYouMean('maxTokens', LOAD)).toBe('maxTokensPerStep');
    expect(didYouMean('allowNaN', LOAD)).toBe(null);
    expect(didYouMean('x', LOAD)).toBe(null);
    expect(didYouMean('stopToken', GENERATE)).toBe('stopTokens');
    expect(didYouMean('top_p', GENERATE)).toBe('topP');
  });
});
