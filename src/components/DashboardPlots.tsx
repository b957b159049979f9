import { Button } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { IPlot } from '../dashboard';
import { errorMessage } from '../notify';
import { arrangePlots, clusterHasGpus } from '../plotcatalog';
import { CommandIDs } from '../tokens';
import { ICluster } from '../types';
import { trans } from '../i18n';

export interface IDashboardPlotsProps {
  cluster: ICluster;
  commands: CommandRegistry;
}

/**
 * A card's "Plots" disclosure: the individual plots of the cluster's Dask
 * dashboard (asked of its scheduler when first opened), the most used first,
 * the rest in groups, those the cluster cannot feed left out (see
 * `plotcatalog.ts`); each opens as a JupyterLab tab.
 */
export function DashboardPlots(
  props: IDashboardPlotsProps
): React.ReactElement | null {
  const { cluster, commands } = props;
  const available = !!cluster.dashboard_url;
  const [open, setOpen] = React.useState(false);
  const [plots, setPlots] = React.useState<IPlot[] | null>(null);
  const [error, setError] = React.useState<string | null>(null);

  React.useEffect(() => {
    if (!available) {
      setOpen(false);
    }
  }, [available]);

  const toggle = async () => {
    if (open) {
      setOpen(false);
      return;
    }
    setOpen(true);
    setError(null);
    if (!plots) {
      try {
        setPlots(
          (await commands.execute(CommandIDs.listPlots, {
            clusterId: cluster.id
          })) as IPlot[]
        );
      } catch (reason) {
        setError(
          trans.__('Could not list the plots: %1', errorMessage(reason))
        );
      }
    }
  };

  const listId = `cm-plots-${cluster.id}`;
  if (!available) {
    return null; // pending, stopped or failed: no dashboard to take plots from
  }
  return (
    <div className={`cm-DashboardPlots${open ? ' cm-mod-open' : ''}`}>
      <Button
        minimal
        small
        className="cm-CardAction cm-PlotsButton"
        aria-label={trans.__('Dashboard plots of %1', cluster.name)}
        aria-expanded={open}
        aria-controls={listId}
        title={trans.__(
          'The individual plots of the Dask dashboard, each in a tab of its own'
        )}
        onClick={() => void toggle()}
      >
        {open ? trans.__('Plots ▴') : trans.__('Plots ▾')}
      </Button>
      {open && (
        <ul
          className="cm-PlotList"
          id={listId}
          aria-label={trans.__('Plots of %1', cluster.name)}
        >
          {error ? (
            <li className="cm-PlotList-error" role="alert">
              {error}
            </li>
          ) : plots ? (
            <PlotGroups
              cluster={cluster}
              commands={commands}
              plots={plots}
              listId={listId}
            />
          ) : (
            <li className="cm-PlotList-loading">
              {trans.__('Loading plots…')}
            </li>
          )}
        </ul>
      )}
    </div>
  );
}

/**
 * The arranged plots: one list item per group, with its name and its plots.
 */
function PlotGroups(props: {
  cluster: ICluster;
  commands: CommandRegistry;
  plots: IPlot[];
  listId: string;
}): React.ReactElement {
  const { cluster, commands, plots, listId } = props;
  const arranged = arrangePlots(plots, { gpus: clusterHasGpus(cluster) });
  return (
    <>
      {arranged.groups.map(group => {
        const headingId = `${listId}-${group.name.replace(/\W+/g, '-')}`;
        return (
          <li key={group.name} className="cm-PlotList-group">
            <span className="cm-PlotList-heading" id={headingId}>
              {group.label}
            </span>
            <ul className="cm-PlotList-items" aria-labelledby={headingId}>
              {group.plots.map(plot => (
                <li key={plot.path}>
                  <Button
                    type="button"
                    className="cm-PlotList-item"
                    onClick={() =>
                      void commands.execute(CommandIDs.openPlot, {
                        clusterId: cluster.id,
                        path: plot.path,
                        label: plot.label
                      })
                    }
                  >
                    {plot.label}
                  </Button>
                </li>
              ))}
            </ul>
          </li>
        );
      })}
      {arranged.hiddenReason && (
        <li className="cm-PlotList-note">
          {trans._n(
            '%1 GPU plot not shown: %2',
            '%1 GPU plots not shown: %2',
            arranged.hidden.length,
            arranged.hiddenReason
          )}
        </li>
      )}
    </>
  );
}
