import { InputGroup } from '@jupyterlab/ui-components';
import * as React from 'react';

import { statusWord } from '../cardstate';
import { ICluster } from '../types';
import { trans } from '../i18n';

/**
 * Above this many clusters the sidebar offers a filter box (and the cards turn compact: compact.ts).
 */
export const MANY_CLUSTERS = 4;

/**
 * Whether a cluster matches the filter text (name, template, backend,
 * status (the API's word or the one shown) or scheduler address;
 * case-insensitive, every word).
 */
export function matchesFilter(cluster: ICluster, text: string): boolean {
  const haystack = [
    cluster.name,
    cluster.template,
    cluster.backend,
    cluster.status,
    statusWord(cluster.status),
    cluster.scheduler_address ?? ''
  ]
    .join(' ')
    .toLowerCase();
  return text
    .toLowerCase()
    .split(/\s+/)
    .filter(Boolean)
    .every(word => haystack.includes(word));
}

/**
 * The filter box, with how many clusters it shows.
 */
export function ClusterFilter(props: {
  value: string;
  onChange: (value: string) => void;
  shown: number;
  total: number;
}): React.ReactElement {
  return (
    <div className="cm-ClusterFilter">
      <InputGroup
        type="search"
        className="cm-ClusterFilter-input"
        aria-label={trans.__('Filter clusters')}
        placeholder={trans.__('Filter by name, template, status…')}
        value={props.value}
        onChange={e => props.onChange(e.target.value)}
      />
      {props.value && (
        <span className="cm-ClusterFilter-count" role="status">
          {trans.__('%1 of %2', props.shown, props.total)}
        </span>
      )}
    </div>
  );
}
