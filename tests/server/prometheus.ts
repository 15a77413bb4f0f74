// What the server tests read of GET /metrics: the text parsed by the npm parser parse-prometheus-text-format
// (its sample lines are a port of the Prometheus Python client's parser), into families by name with
// their samples, and each histogram series with its cumulative buckets, sum and count.
//
// The parser's histogram grouping keeps one unlabelled series only (a labelled series loses its labels,
// _sum and _count), so histograms are read twice: the whole text as it is (names, HELP, TYPE, every
// line valid), then with the histogram families declared untyped, which gives each _bucket, _sum and
// _count line with its labels, parsed by the same code; the series are put together here.
import parsePrometheusTextFormat, { type PromFamily } from 'parse-prometheus-text-format';

export interface Sample { labels: Record<string, string>; value: number }
export interface HistogramSeries { labels: Record<string, string>; buckets: { le: number; count: number }[]; sum: number; count: number }
export interface Family { name: string; help: string; type: PromFamily['type']; samples: Sample[]; histograms: HistogramSeries[] }

/** A sample value as the text format spells it. */
function number(s: string | undefined, what: string): number {
  if (s === undefined) throw new Error(`${what}: expected a value, got none`);
  const v = s === '+Inf' ? Infinity : s === '-Inf' ? -Infinity : Number(s);
  if (Number.isNaN(v) && s !== 'NaN') throw new Error(`${what}: expected a number, got '${s}'`);
  return v;
}

const key = (labels: Record<string, string>): string => JSON.stringify(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)));

/** Parses an exposition; throws on a line the parser refuses or a histogram that is not whole. */
export function parseExposition(text: string): Map<string, Family> {
  const out = new Map<string, Family>();
  const parsed = parsePrometheusTextFormat(text);
  const histograms = parsed.filter((f) => f.type === 'HISTOGRAM').map((f) => f.name);
  for (const f of parsed) {
    if (out.has(f.name)) throw new Error(`family ${f.name}: expected once, got twice`);
    const samples = f.type === 'HISTOGRAM' ? [] : f.metrics.map((m, i) => ({ labels: m.labels ?? {}, value: number(m.value, `${f.name} sample ${i}`) }));
    out.set(f.name, { name: f.name, help: f.help, type: f.type, samples, histograms: [] });
  }
  if (!histograms.length) return out;
  // The histograms' lines, each family untyped: every suffixed line comes back as its own family.
  const untyped = text.split('\n').map((l) => {
    const m = /^# TYPE (\S+) histogram$/.exec(l);
    return m && histograms.includes(m[1]) ? `# TYPE ${m[1]} untyped` : l;
  }).join('\n');
  const lines = new Map<string, PromFamily>();
  for (const f of parsePrometheusTextFormat(untyped)) lines.set(f.name, f);
  for (const name of histograms) {
    const series = new Map<string, HistogramSeries>();
    const at = (labels: Record<string, string>): HistogramSeries => {
      const k = key(labels);
      let s = series.get(k);
      if (!s) series.set(k, s = { labels, buckets: [], sum: NaN, count: NaN });
      return s;
    };
    for (const m of lines.get(`${name}_bucket`)?.metrics ?? []) {
      const { le, ...labels } = m.labels ?? {};
      if (le === undefined) throw new Error(`${name}_bucket: expected an le label, got ${JSON.stringify(m.labels)}`);
      at(labels).buckets.push({ le: number(le, `${name}_bucket le`), count: number(m.value, `${name}_bucket`) });
    }
    for (const m of lines.get(`${name}_sum`)?.metrics ?? []) at(m.labels ?? {}).sum = number(m.value, `${name}_sum`);
    for (const m of lines.get(`${name}_count`)?.metrics ?? []) at(m.labels ?? {}).count = number(m.value, `${name}_count`);
    out.get(name)!.histograms = [...series.values()];
  }
  return out;
}

/** The family `name`, or an error naming it. */
export function family(m: Map<string, Family>, name: string): Family {
  const f = m.get(name);
  if (!f) throw new Error(`metrics: expected a family ${name}, got ${[...m.keys()].join(', ')}`);
  return f;
}

/** The one sample of `name` whose labels include `labels`. */
export function sample(m: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const f = family(m, name);
  const hits = f.samples.filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (hits.length !== 1) throw new Error(`${name}${JSON.stringify(labels)}: expected one sample, got ${hits.length}`);
  return hits[0].value;
}

/** The one series of histogram `name`. */
export function histogram(m: Map<string, Family>, name: string): HistogramSeries {
  const f = family(m, name);
  if (f.histograms.length !== 1) throw new Error(`${name}: expected one series, got ${f.histograms.length}`);
  return f.histograms[0];
}
