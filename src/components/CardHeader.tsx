/**
 * The top of a cluster card: name, template, origin and status, the
 * cluster's errors, and its scheduler address with a copy button.
 */
import { Button, copyIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { hasEnded, shownStatus, statusWord } from '../cardstate';
import { ICluster } from '../types';
import { SchedulerAddress } from './CardParts';
import { ExternalBadge } from './ExternalBadge';
import { trans } from '../i18n';

/**
 * Name, template, the "external" mark and the status badge.
 */
export function CardHeader(props: { cluster: ICluster }): React.ReactElement {
  const { cluster } = props;
  const status = shownStatus(cluster);
  return (
    <div className="cm-ClusterCard-header">
      <span className="cm-ClusterCard-name" title={cluster.name}>
        {cluster.name}
      </span>
      <span className="cm-ClusterCard-template" title={cluster.template}>
        {cluster.template}
      </span>
      <ExternalBadge cluster={cluster} />
      <span
        className={`cm-StatusBadge cm-StatusBadge-${status}`}
        aria-label={trans.__('Status: %1', statusWord(status))}
        title={
          status === 'refused'
            ? trans.__(
                'The scheduler runs, but every worker was refused: no work can run'
              )
            : undefined
        }
      >
        {statusWord(status)}
      </span>
    </div>
  );
}

/**
 * The cluster's error, and each group's own (when it says something else).
 */
export function CardErrors(props: { cluster: ICluster }): React.ReactElement {
  const { cluster } = props;
  return (
    <>
      {cluster.error && (
        <div className="cm-ClusterCard-error" role="alert">
          {cluster.error}
        </div>
      )}
      {cluster.workers.groups
        .filter(g => g.error && g.error !== cluster.error)
        .map(g => (
          <div key={g.name} className="cm-ClusterCard-error" role="alert">
            {`${g.name}: ${g.error}`}
          </div>
        ))}
    </>
  );
}

/**
 * How a stopped cluster ended by itself: news, not an error.
 */
export function CardEnded(props: {
  cluster: ICluster;
}): React.ReactElement | null {
  const { cluster } = props;
  if (cluster.status !== 'stopped' || !cluster.ended) {
    return null;
  }
  return <div className="cm-ClusterCard-ended">{cluster.ended}</div>;
}

/**
 * The scheduler address, and a button that copies it once there is one.
 */
export function CardScheduler(props: {
  cluster: ICluster;
  onCopy: () => void;
}): React.ReactElement {
  const { cluster } = props;
  return (
    <div className="cm-ClusterCard-scheduler">
      <SchedulerAddress
        address={cluster.scheduler_address}
        clusterName={cluster.name}
        ended={hasEnded(cluster)}
      />
      {cluster.scheduler_address && (
        <Button
          type="button"
          className="jp-mod-styled cm-IconButton cm-CopyAddress"
          aria-label={trans.__(
            'Copy the scheduler address of %1',
            cluster.name
          )}
          title={trans.__('Copy the scheduler address')}
          onClick={props.onCopy}
        >
          <copyIcon.react tag="span" />
        </Button>
      )}
    </div>
  );
}
