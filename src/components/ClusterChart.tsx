/**
 * A cluster's workers, memory and CPU in use over its whole life (served by
 * the server's `clusters/{id}/timeline`), with a readout of the point under
 * the pointer (or the keyboard's), and what the cluster has used so far.
 */
import * as React from 'react';

import {
  formatCores,
  formatMemoryUsage,
  formatSize,
  formatTime,
  formatUsage,
  plural,
  usageNow
} from '../format';
import { requestAPI } from '../request';
import { ICluster, ITimeline, ITimelinePoint, IUsage } from '../types';
import { trans } from '../i18n';

/**
 * How often a running cluster's timeline is fetched again, in ms.
 */
export const TIMELINE_REFRESH = 5000;

/**
 * Re-render every `ms`, for values that run on with the clock.
 */
export function useNow(ms: number): number {
  const [now, setNow] = React.useState(Date.now());
  React.useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}

/**
 * The timeline of a cluster, fetched now and again while it runs; null until
 * the first answer (or when the server has none: an older server).
 */
function useTimeline(cluster: ICluster): ITimeline | null {
  const [timeline, setTimeline] = React.useState<ITimeline | null>(null);
  const live = !['stopped', 'failed'].includes(cluster.status);
  // The card changed (workers came or went): fetched again at once, so the
  // chart does not trail the numbers above it.
  const change = `${cluster.workers.running}/${cluster.workers.pending}/${cluster.resources?.memory ?? 0}`;
  React.useEffect(() => {
    let cancelled = false;
    const load = async () => {
      try {
        const data = await requestAPI<ITimeline>(
          `clusters/${encodeURIComponent(cluster.id)}/timeline`
        );
        if (!cancelled) {
          setTimeline(data);
        }
      } catch {
        // kept as it was: the next refresh tries again
      }
    };
    void load();
    const timer = live ? setInterval(load, TIMELINE_REFRESH) : undefined;
    return () => {
      cancelled = true;
      if (timer !== undefined) {
        clearInterval(timer);
      }
    };
  }, [cluster.id, live, change]);
  return timeline;
}

/**
 * "12:03:10 · 2 workers · 310 MiB of 512 MiB memory · 0.4 cores busy".
 */
export function pointText(point: ITimelinePoint): string {
  const workers = Math.round(point.workers * 10) / 10;
  return [
    formatTime(point.time),
    plural(workers, 'worker'),
    trans.__(
      '%1 of %2 memory',
      formatSize(point.memory),
      formatSize(point.memory_limit)
    ),
    trans.__('%1 cores busy', formatCores(Math.round(point.cpu * 10) / 10))
  ].join(' · ');
}

/**
 * A line through the points' values, scaled to `top`.
 */
function linePath(
  points: ReadonlyArray<ITimelinePoint>,
  value: (p: ITimelinePoint) => number,
  x: (i: number) => number,
  y: (fraction: number) => number,
  top: number
): string {
  return points
    .map(
      (p, i) =>
        `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${y(value(p) / top).toFixed(1)}`
    )
    .join('');
}

/**
 * The chart: workers (scaled to the most there were), memory in use (to the
 * largest memory limit) and cores busy (to the most busy), over the whole
 * life of the cluster, with a readout of one point.
 */
export function TimelineChart(props: {
  timeline: ITimeline;
  width?: number;
  height?: number;
  /**
   * What the card shows now (connected workers, their memory limit): the
   * "now" readout says that, at the current time, rather than the last
   * point (which covers the seconds before it).
   */
  current?: { workers: number; memory_limit: number };
}): React.ReactElement | null {
  const { timeline, width = 200, height = 32 } = props;
  const points = timeline.points;
  const [hover, setHover] = React.useState<number | null>(null);
  const now = useNow(1000);
  if (!points.length) {
    return null;
  }
  const pad = 2;
  const last = points.length - 1;
  const x = (i: number) => pad + (last ? i / last : 1) * (width - 2 * pad);
  const y = (fraction: number) =>
    height - pad - Math.min(1, Math.max(0, fraction)) * (height - 2 * pad);
  const topWorkers = Math.max(1, ...points.map(p => p.workers));
  const topMemory = Math.max(
    1,
    ...points.map(p => Math.max(p.memory_limit, p.memory))
  );
  const topCpu = Math.max(1, ...points.map(p => p.cpu));
  const shown = hover === null ? last : Math.min(hover, last);
  const pick = (clientX: number, svg: SVGSVGElement) => {
    const box = svg.getBoundingClientRect();
    const fraction = box.width ? (clientX - box.left) / box.width : 1;
    setHover(Math.round(Math.min(1, Math.max(0, fraction)) * last));
  };
  const label = trans.__(
    'Workers, memory and CPU in use since the cluster started (%1 points of %2 s)',
    points.length,
    timeline.resolution
  );
  return (
    <div className="cm-ClusterChart">
      <svg
        className="cm-ClusterChart-plot"
        height={height}
        viewBox={`0 0 ${width} ${height}`}
        preserveAspectRatio="none"
        role="img"
        aria-label={label}
        tabIndex={0}
        onMouseMove={event => pick(event.clientX, event.currentTarget)}
        onMouseLeave={() => setHover(null)}
        onBlur={() => setHover(null)}
        onKeyDown={event => {
          const step = { ArrowLeft: -1, ArrowRight: 1 }[event.key];
          if (step !== undefined) {
            event.preventDefault();
            setHover(Math.min(last, Math.max(0, shown + step)));
          }
        }}
      >
        <line
          className="cm-ClusterChart-axis"
          x1={pad}
          x2={width - pad}
          y1={height - pad}
          y2={height - pad}
        />
        <path
          className="cm-ClusterChart-memory"
          d={linePath(points, p => p.memory, x, y, topMemory)}
        />
        <path
          className="cm-ClusterChart-cpu"
          d={linePath(points, p => p.cpu, x, y, topCpu)}
        />
        <path
          className="cm-ClusterChart-workers"
          d={linePath(points, p => p.workers, x, y, topWorkers)}
        />
        {hover !== null && (
          <line
            className="cm-ClusterChart-cursor"
            x1={x(shown)}
            x2={x(shown)}
            y1={0}
            y2={height}
          />
        )}
      </svg>
      <div
        className="cm-ClusterChart-readout"
        data-point={shown}
        aria-live="polite"
      >
        <span className="cm-ClusterChart-key cm-mod-workers" />
        <span className="cm-ClusterChart-key cm-mod-memory" />
        <span className="cm-ClusterChart-key cm-mod-cpu" />
        {hover === null ? trans.__('now ') : ''}
        {pointText(
          hover === null
            ? {
                ...points[shown],
                ...props.current,
                time: new Date(now).toISOString()
              }
            : points[shown]
        )}
      </div>
    </div>
  );
}

/**
 * "12.4 core-hours · 1.0 GPU-hours · 48 GiB-hours", running on with the clock.
 */
export function UsageText(props: { usage: IUsage }): React.ReactElement {
  const now = useNow(5000);
  const running = props.usage.rate.cores > 0;
  const amounts = usageNow(props.usage, running ? now : 0);
  const gpus = amounts.gpu_seconds > 0 || props.usage.rate.gpus > 0;
  const memory = formatMemoryUsage(amounts.memory_seconds);
  const groups = props.usage.groups
    .map(g => `${g.name}: ${formatUsage(g.core_seconds, 'core')}`)
    .join('\n');
  return (
    <span
      className="cm-ClusterCard-usage"
      title={trans.__(
        'Used since the cluster started, per group (as of its last change):\n%1',
        groups
      )}
    >
      <span className="cm-ClusterCard-coreUsage">
        {formatUsage(amounts.core_seconds, 'core')}
      </span>
      {gpus && ` · ${formatUsage(amounts.gpu_seconds, 'GPU')}`}
      {memory !== null && ` · ${memory}`}
    </span>
  );
}

/**
 * The card's chart: the server's timeline once it has answered, else the
 * `fallback` (e.g. the workers seen since the sidebar opened).
 */
export function ClusterChart(props: {
  cluster: ICluster;
  fallback: React.ReactNode;
}): React.ReactElement {
  const timeline = useTimeline(props.cluster);
  const points = timeline && Array.isArray(timeline.points);
  const { cluster } = props;
  return timeline && points && timeline.points.length ? (
    <TimelineChart
      timeline={timeline}
      current={{
        workers: cluster.workers.running,
        memory_limit: cluster.resources?.memory ?? 0
      }}
    />
  ) : (
    <>{props.fallback}</>
  );
}
