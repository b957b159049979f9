import * as React from 'react';

import { ClustersModel } from '../model';
import { trans } from '../i18n';

export interface ISparklineProps {
  points: ReadonlyArray<ClustersModel.IHistoryPoint>;
  width?: number;
  height?: number;
  /**
   * The shortest span shown, in ms (a new cluster's history is short).
   */
  minSpan?: number;
}

/**
 * Re-render every `ms` so that the chart's right edge stays "now".
 */
function useNow(ms: number): number {
  const [now, setNow] = React.useState(Date.now());
  React.useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}

/**
 * A step line through the points, carried on to `now`.
 */
function stepPath(
  points: ReadonlyArray<ClustersModel.IHistoryPoint>,
  value: (p: ClustersModel.IHistoryPoint) => number,
  x: (t: number) => number,
  y: (v: number) => number,
  now: number
): string {
  let d = '';
  points.forEach((p, i) => {
    const px = x(p.time).toFixed(1);
    const py = y(value(p)).toFixed(1);
    d += i === 0 ? `M${px},${py}` : `H${px}V${py}`;
  });
  return `${d}H${x(now).toFixed(1)}`;
}

/**
 * Workers over the last minutes: running (solid) and requested (dashed),
 * as an inline SVG.
 */
export function Sparkline(props: ISparklineProps): React.ReactElement | null {
  const { points, width = 200, height = 28, minSpan = 10000 } = props;
  const now = Math.max(
    useNow(5000),
    points.length ? points[points.length - 1].time : 0
  );
  if (!points.length) {
    return null;
  }
  const start = Math.min(points[0].time, now - minSpan);
  const top = Math.max(1, ...points.map(p => Math.max(p.running, p.requested)));
  const pad = 2;
  const x = (t: number) =>
    pad + ((t - start) / (now - start)) * (width - 2 * pad);
  const y = (v: number) => height - pad - (v / top) * (height - 2 * pad);
  const last = points[points.length - 1];
  const minutes = Math.max(1, Math.round((now - start) / 60000));
  const label = trans._n(
    'Workers over the last %1 minute: now %2 running of %3 requested, at most %4',
    'Workers over the last %1 minutes: now %2 running of %3 requested, at most %4',
    minutes,
    last.running,
    last.requested,
    top
  );
  return (
    <svg
      className="cm-Sparkline"
      height={height}
      viewBox={`0 0 ${width} ${height}`}
      preserveAspectRatio="none"
      role="img"
      aria-label={label}
    >
      <title>{label}</title>
      <line
        className="cm-Sparkline-axis"
        x1={pad}
        x2={width - pad}
        y1={height - pad}
        y2={height - pad}
      />
      <path
        className="cm-Sparkline-requested"
        d={stepPath(points, p => p.requested, x, y, now)}
      />
      <path
        className="cm-Sparkline-running"
        d={stepPath(points, p => p.running, x, y, now)}
      />
    </svg>
  );
}
