// The demo's Check slice names cases of tests/cases; a case renamed without the slice would make the
// page report "no test case has this name" — caught here rather than in the browser suite.
import { describe, expect, it } from 'vitest';
import { sliceNames } from '../../demo/slice';
import { allCases } from '../cases/index';

describe('demo check slice', () => {
  for (const subgroups of [false, true]) {
    it(`every name of the slice (subgroups ${subgroups}) is a test case`, () => {
      const names = new Set(allCases.map((c) => c.name));
      const names_ = sliceNames(subgroups);
      expect(names_.length).toBeGreaterThan(20);
      expect(names_.filter((n) => !names.has(n))).toEqual([]);
    });
  }
});
