/**
 * A card's "Workers" disclosure: each worker of the cluster (asked of the
 * server's `clusters/{id}/workers` when opened, and again whenever the
 * card's numbers change while it is open) with its name, group, address,
 * host, process id (where it runs on this machine), memory and state.
 */
import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

import { hasEnded } from '../cardstate';
import { trans } from '../i18n';
import { errorMessage } from '../notify';
import { requestAPI } from '../request';
import { ICluster, IWorkerInfo, IWorkerList } from '../types';
import { workerMemoryText } from '../workers';

/**
 * A worker's state in words.
 */
function stateWord(state: IWorkerInfo['state']): string {
  const words: { [state: string]: string } = {
    starting: trans.__('starting'),
    running: trans.__('running'),
    closing: trans.__('closing'),
    gone: trans.__('gone')
  };
  return words[state] ?? state;
}

export function CardWorkers(props: {
  cluster: ICluster;
}): React.ReactElement | null {
  const { cluster } = props;
  const [open, setOpen] = React.useState(false);
  const [workers, setWorkers] = React.useState<IWorkerInfo[] | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  const { running, pending, stopping } = cluster.workers;
  const change = `${cluster.status}/${running}/${pending}/${stopping}`;

  React.useEffect(() => {
    if (!open) {
      return;
    }
    let cancelled = false;
    requestAPI<IWorkerList>(
      `clusters/${encodeURIComponent(cluster.id)}/workers`
    )
      .then(data => {
        if (!cancelled) {
          setWorkers(data.workers);
          setError(null);
        }
      })
      .catch(reason => {
        if (!cancelled) {
          setError(
            trans.__('Could not list the workers: %1', errorMessage(reason))
          );
        }
      });
    return () => {
      cancelled = true;
    };
  }, [open, cluster.id, change]);

  if (hasEnded(cluster)) {
    return null; // failed or stopped: no workers to list
  }
  const listId = `cm-workers-${cluster.id}`;
  return (
    <div className={`cm-CardWorkers${open ? ' cm-mod-open' : ''}`}>
      <Button
        minimal
        small
        className="cm-CardAction cm-WorkersButton"
        aria-label={trans.__('Workers of %1', cluster.name)}
        aria-expanded={open}
        aria-controls={listId}
        title={trans.__(
          'Each worker: name, group, address, host, process id, memory and state'
        )}
        onClick={() => setOpen(!open)}
      >
        {open ? trans.__('Workers ▴') : trans.__('Workers ▾')}
      </Button>
      {open && (
        <ul
          className="cm-WorkerList"
          id={listId}
          aria-label={trans.__('Workers of %1', cluster.name)}
        >
          {error ? (
            <li className="cm-WorkerList-error" role="alert">
              {error}
            </li>
          ) : workers === null ? (
            <li className="cm-WorkerList-loading">{trans.__('Loading…')}</li>
          ) : workers.length === 0 ? (
            <li className="cm-WorkerList-empty">{trans.__('No workers')}</li>
          ) : (
            workers.map(worker => (
              <WorkerItem key={worker.name} worker={worker} />
            ))
          )}
        </ul>
      )}
    </div>
  );
}

function WorkerItem(props: { worker: IWorkerInfo }): React.ReactElement {
  const { worker } = props;
  const memory = workerMemoryText(worker);
  return (
    <li
      className="cm-WorkerList-item"
      data-state={worker.state}
      data-worker={worker.name}
    >
      <div className="cm-WorkerList-head">
        <span className="cm-WorkerList-name" title={worker.name}>
          {worker.name}
        </span>
        {worker.group && (
          <span className="cm-WorkerList-group">{worker.group}</span>
        )}
        <span className="cm-WorkerList-state">{stateWord(worker.state)}</span>
      </div>
      <div className="cm-WorkerList-where">
        {worker.address && (
          <span className="cm-WorkerList-address" title={worker.address}>
            {worker.address}
          </span>
        )}
        {worker.host && (
          <span className="cm-WorkerList-host">
            {trans.__('host %1', worker.host)}
          </span>
        )}
        {worker.pid !== null && (
          <span className="cm-WorkerList-pid">
            {trans.__('PID %1', worker.pid)}
          </span>
        )}
        {memory && <span className="cm-WorkerList-memory">{memory}</span>}
        {worker.threads !== null && (
          <span className="cm-WorkerList-threads">
            {trans._n('%1 thread', '%1 threads', worker.threads)}
          </span>
        )}
      </div>
    </li>
  );
}
