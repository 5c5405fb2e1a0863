// Figures the benchmark drivers share: percentiles of a list of milliseconds and how they print.

export function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.round((sorted.length - 1) * p)];
}

export function ms(value) {
  return value < 1 ? `${(value * 1000).toFixed(0)} µs` : `${value.toFixed(2)} ms`;
}

export function mb(bytes) {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

export function ratio(a, b) {
  return `${(a / b).toFixed(2)}×`;
}

// A verdict against a target, never an assertion: the run still prints everything.
export function against(met, target) {
  return `${met ? 'meets' : 'MISSES'} target ${target}`;
}
