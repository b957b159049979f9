import { badNews, goneNews } from '../badnews';
import { FULL_CAPABILITIES } from '../capabilities';
import {
  canRestart,
  removalLabel,
  shownStatus,
  whyNotScalable,
  withoutShownError
} from '../cardstate';
import { ICluster, IEvent } from '../types';

function cluster(extra: Partial<ICluster> = {}): ICluster {
  return {
    id: 'c1',
    name: 'analysis',
    template: 'local',
    backend: 'local',
    status: 'running',
    error: null,
    scheduler_address: 'tcp://127.0.0.1:1',
    dashboard_url: null,
    spec: { groups: [] },
    workers: {
      requested: 1,
      running: 1,
      pending: 0,
      pending_reasons: {},
      groups: [
        {
          name: 'default',
          requested: 1,
          running: 1,
          pending: 0,
          pending_reasons: {},
          error: null
        }
      ]
    },
    resources: { cores: 1, memory: 1, gpus: 0 },
    adapt: null,
    options: {},
    last_decision: null,
    created: '2026-01-01T00:00:00+00:00',
    ...extra
  } as ICluster;
}

const event = (extra: Partial<IEvent> = {}): IEvent => ({
  time: '2026-01-01T00:00:00+00:00',
  kind: 'lifecycle',
  message: 'worker default-1 exited',
  group: 'default',
  before: null,
  after: null,
  source: 'system',
  ...extra
});

describe('badNews', () => {
  it('reports every event with a cause, with its detail, once', () => {
    // Given an event with a cause and one without
    const killed = event({
      cause: {
        kind: 'oom-killer',
        worker: 'default-1',
        group: 'default',
        detail: 'killed by the OOM killer'
      }
    });
    // When the news is read
    const news = badNews(cluster(), cluster(), [
      killed,
      killed,
      event({ message: 'scaled' })
    ]);
    // Then only the caused one is news, once, with its detail
    expect(news).toEqual([
      {
        clusterId: 'c1',
        message: 'analysis: worker default-1 exited (killed by the OOM killer)',
        level: 'warning'
      }
    ]);
  });

  it('reports a cluster that fails or stops answering, in the server’s words', () => {
    const failed = cluster({
      status: 'failed',
      error: 'lost the connection to the scheduler'
    });
    expect(badNews(cluster(), failed)).toEqual([
      {
        clusterId: 'c1',
        message: 'analysis: lost the connection to the scheduler',
        level: 'error'
      }
    ]);
    // And the same error again is not news
    expect(badNews(failed, failed)).toEqual([]);
    // And a page load (never seen before) repeats nothing
    expect(badNews(undefined, failed)).toEqual([]);
  });

  it('reports a group whose workers are refused', () => {
    const refused = cluster();
    refused.workers = {
      ...refused.workers,
      groups: [
        {
          ...refused.workers.groups[0],
          error: 'sbatch: error: invalid partition'
        }
      ]
    };
    expect(badNews(cluster(), refused).map(n => n.message)).toEqual([
      'analysis: group default: sbatch: error: invalid partition'
    ]);
  });

  it('says a cluster started elsewhere may still run', () => {
    const [attached, own] = goneNews([
      {
        id: 'a',
        name: 'outside',
        capabilities: { ...FULL_CAPABILITIES, can_stop: false }
      },
      { id: 'b', name: 'mine', capabilities: FULL_CAPABILITIES }
    ]);
    expect(attached.message).toMatch(/may still run there/);
    expect(own.message).toMatch(/^mine is gone/);
  });
});

describe('card state', () => {
  it('offers Restart and Remove for a failed cluster, and says why it cannot scale', () => {
    const failed = cluster({ status: 'failed' });
    expect(canRestart(failed)).toBe(true);
    expect(removalLabel(failed)).toBe('Remove');
    expect(whyNotScalable(failed)).toBe('The cluster failed: restart it first');
    expect(whyNotScalable(cluster())).toBeNull();
  });

  it('never restarts a discovered cluster, and detaches an external one', () => {
    expect(
      canRestart(cluster({ status: 'failed', template: 'discovered' }))
    ).toBe(false);
    const external = cluster({
      capabilities: {
        ...FULL_CAPABILITIES,
        can_scale: false,
        can_stop: false,
        multiple_groups: false,
        readoptable: false,
        runs_processes_here: false
      }
    });
    expect(removalLabel(external)).toBe('Detach');
    expect(whyNotScalable(external)).toMatch(/Started elsewhere/);
  });

  it('says "refused", not "running", when every worker was refused', () => {
    // Given a SLURM cluster whose scheduler runs and whose jobs sbatch refused
    const error =
      'sbatch refused worker default-1: sbatch: error: unable to contact slurm controller';
    const refused = cluster({
      error,
      workers: {
        requested: 0,
        running: 0,
        pending: 0,
        pending_reasons: {},
        waiting: [],
        stopping: 0,
        groups: [
          {
            name: 'default',
            requested: 0,
            running: 0,
            pending: 0,
            pending_reasons: {},
            error
          }
        ]
      }
    });
    // Then its state is "refused"
    expect(shownStatus(refused)).toBe('refused');
    // And a cluster with a worker running, one pending, or one stopping is what the server says
    expect(shownStatus(cluster())).toBe('running');
    const pending = cluster({
      workers: { ...refused.workers, pending: 1 }
    });
    expect(shownStatus(pending)).toBe('running');
    expect(shownStatus({ ...refused, status: 'failed' })).toBe('failed');
    // And one scaled to 0 on purpose (no group error) is running
    const idle = cluster({
      workers: {
        ...refused.workers,
        groups: [{ ...refused.workers.groups[0], error: null }]
      }
    });
    expect(shownStatus(idle)).toBe('running');
  });

  it('says an error once: a decision drops the error shown above it', () => {
    const error = 'sbatch refused worker default-1: sbatch: error: down';
    expect(withoutShownError(`not retrying: ${error}`, [null, error])).toBe(
      'not retrying'
    );
    expect(withoutShownError('manual scale', [error])).toBe('manual scale');
    expect(withoutShownError(error, [error])).toBe(error);
  });
});
