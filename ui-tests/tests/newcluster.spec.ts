/**
 * The New Cluster dialog against a fake server: templates with their
 * description and defaults, the Worker Spec editor prefilled from the chosen
 * one, add/remove group, live previews, the request sent, the server's
 * message next to the field it names, and the default-template setting.
 */
import { expect, galata, test } from './fixtures';

import { errorToasts, fakeCluster, fakeServer, openSidebar } from './fakes';

test.use({ autoGoto: false });

test('lists templates and prefills the Worker Spec editor', async ({
  page
}) => {
  const server = await fakeServer(page, [], (route, method, body) =>
    route.fulfill({
      status: 202,
      json: fakeCluster('new', {
        name: body.name,
        status: 'pending',
        scheduler_address: null
      })
    })
  );
  await page.goto();
  const sidebar = await openSidebar(page);
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();

  const dialog = page.locator('.cm-FormDialog');
  await expect(dialog).toBeVisible();
  const templates = dialog.getByRole('radiogroup', { name: 'Template' });
  await expect(templates.locator('.cm-Template-name')).toHaveText([
    'local',
    'local-adaptive',
    'gpu'
  ]);
  await expect(
    templates.locator(
      '[data-template="local-adaptive"] .cm-Template-description'
    )
  ).toHaveText('Local processes that grow with the load (0 to 4 workers)');
  await expect(
    templates.locator('[data-template="local"] .cm-Template-defaults')
  ).toHaveText('local · 2 workers · 2 cores · 4 GiB');
  await expect(
    templates.locator('[data-template="local-adaptive"] .cm-Template-defaults')
  ).toHaveText('local · 0 workers · 0 cores · 0 B · adaptive 0–4 workers');

  // The first template is chosen; its spec fills the editor.
  await expect(
    templates.getByRole('radio', { name: /^local Local/ })
  ).toBeChecked();
  const row = dialog.locator('.cm-SpecEditor-group');
  await expect(row).toHaveCount(1);
  await expect(dialog.getByLabel('Group name, group 1')).toHaveValue('default');
  await expect(dialog.getByLabel('Number of workers, group 1')).toHaveValue(
    '2'
  );
  await expect(
    dialog.getByLabel('Memory per worker, e.g. 4 GiB, group 1')
  ).toHaveValue('2 GiB');
  await expect(dialog.locator('.cm-SpecEditor-detail .cm-Preview')).toHaveText(
    '→ 2 workers · 2 cores · 4 GiB'
  );

  // Live preview while typing.
  await dialog.getByLabel('Threads (cores) per worker, group 1').fill('2');
  await dialog.getByLabel('Number of workers, group 1').fill('4');
  await expect(dialog.locator('.cm-SpecEditor-detail .cm-Preview')).toHaveText(
    '→ 4 workers · 8 cores · 8 GiB'
  );

  // Another template replaces the editor's content, adaptive range included.
  await templates.getByRole('radio', { name: /^gpu/ }).check();
  await expect(row).toHaveCount(2);
  await expect(dialog.getByLabel('Group name, group 2')).toHaveValue('gpu');
  await expect(dialog.locator('.cm-SpecEditor-total')).toHaveText(
    'Total → 3 workers · 8 cores · 24 GiB · 1 GPU'
  );
  await templates.getByRole('radio', { name: /^local-adaptive/ }).check();
  await expect(dialog.locator('.cm-AdaptRange-on')).toBeChecked();
  await expect(dialog.locator('.cm-AdaptRange-maximum input')).toHaveValue('4');
  await expect(dialog.locator('.cm-AdaptRange-preview')).toHaveText(
    '→ 0–4 workers · 0–4 cores · 0 B–8 GiB'
  );

  // Add and remove groups.
  await dialog.getByRole('button', { name: 'Add group' }).click();
  await expect(row).toHaveCount(2);
  await expect(dialog.getByLabel('Group name, group 2')).toHaveValue('group-2');
  await dialog.getByRole('button', { name: 'Remove group group-2' }).click();
  await expect(row).toHaveCount(1);
  await expect(
    dialog.getByRole('button', { name: 'Remove group default' })
  ).toBeDisabled();

  await dialog.getByLabel('Name', { exact: true }).fill('My cluster');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await expect(dialog).toHaveCount(0);
  expect(server.calls).toEqual([
    {
      method: 'POST',
      path: '/clustermgr/api/clusters',
      body: {
        template: 'local-adaptive',
        name: 'My cluster',
        spec: {
          groups: [
            // Memory left as the template had it: its exact bytes.
            {
              name: 'default',
              count: 0,
              threads: 1,
              memory: 2 * 2 ** 30,
              gpus: 0
            }
          ]
        },
        adapt: { minimum: 0, maximum: 4, unit: 'workers' }
      }
    }
  ]);
  // The pending card shows at once (the stream usually reports it first).
  const card = sidebar.locator('.cm-ClusterCard[data-cluster-id="new"]');
  await expect(card.locator('.cm-StatusBadge')).toHaveText('pending');
});

test('explains a value that does not read; shows the server message once, next to its field', async ({
  page
}) => {
  let attempts = 0;
  await fakeServer(page, [], (route, method, body) => {
    attempts += 1;
    if (attempts === 1) {
      return route.fulfill({
        status: 400,
        json: {
          code: 'invalid',
          message: 'spec.groups[0].memory: more than one node of this site has',
          field: 'spec.groups[0].memory'
        }
      });
    }
    return route.fulfill({
      status: 409,
      json: {
        code: 'conflict',
        message: 'at most 8 clusters',
        field: 'template'
      }
    });
  });
  await page.goto();
  const sidebar = await openSidebar(page);
  await sidebar.getByRole('button', { name: 'New Cluster' }).click();
  const dialog = page.locator('.cm-FormDialog');
  const memory = dialog.getByLabel('Memory per worker, e.g. 4 GiB, group 1');
  const message = dialog.locator('#cm-new-g0-memory-error');
  await memory.fill('lots');
  // The value explains itself at once, and is not sent.
  await expect(message).toHaveText(
    '“lots” is not a size; use e.g. 512 MiB, 4 GiB or 1 TB'
  );
  await expect(memory).toHaveAttribute('aria-invalid', 'true');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await expect(dialog).toBeVisible();
  expect(attempts).toBe(0);

  // The server's refusal: next to the field, once, without its path.
  await memory.fill('4 TiB');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await expect(message).toHaveText('more than one node of this site has');
  await expect(memory).toHaveAttribute('aria-invalid', 'true');
  await expect(memory).toHaveAttribute(
    'aria-describedby',
    'cm-new-g0-memory-error'
  );
  await expect(
    dialog.getByText('more than one node of this site has')
  ).toHaveCount(1);
  await expect(dialog.getByText('spec.groups')).toHaveCount(0);
  await expect(dialog.locator('.jp-Dialog-content')).toHaveScreenshot(
    'new-cluster-invalid.png',
    {
      maxDiffPixelRatio: 0.02
    }
  );

  await memory.fill('4 GiB');
  await dialog.getByRole('button', { name: 'Create' }).click();
  await expect(dialog.locator('#cm-new-template-error')).toHaveText(
    'at most 8 clusters'
  );
  // No notification on top of what the form shows.
  expect(await errorToasts(page).count()).toBe(0);
  await dialog.locator('.jp-Dialog-button.jp-mod-reject').click();
  await expect(dialog).toHaveCount(0);
  expect(attempts).toBe(2);
});

test.describe('with a default template set', () => {
  test.use({
    mockSettings: {
      ...galata.DEFAULT_SETTINGS,
      'clustermgr-lab:plugin': { defaultTemplate: 'gpu' }
    }
  });

  test('the setting chooses the template', async ({ page }) => {
    await fakeServer(page, []);
    await page.goto();
    const sidebar = await openSidebar(page);
    await sidebar.getByRole('button', { name: 'New Cluster' }).click();
    const dialog = page.locator('.cm-FormDialog');
    await expect(dialog.getByRole('radio', { name: /^gpu/ })).toBeChecked();
    await expect(dialog.locator('.cm-SpecEditor-group')).toHaveCount(2);
    await expect(dialog.locator('.jp-Dialog-content')).toHaveScreenshot(
      'new-cluster-gpu.png',
      {
        maxDiffPixelRatio: 0.02
      }
    );
    await page.keyboard.press('Escape');
    await expect(dialog).toHaveCount(0);
  });

  test('the preferences are in the Settings Editor', async ({ page }) => {
    await fakeServer(page, []);
    await page.goto();
    await page.evaluate(() =>
      (window as any).jupyterapp.commands.execute('settingeditor:open', {
        query: 'Clusters'
      })
    );
    const editor = page.locator('.jp-SettingsPanel');
    await expect(
      editor.getByText('Default template', { exact: true })
    ).toBeVisible();
    await expect(
      editor.getByText('Connect new kernels to cluster', { exact: true })
    ).toBeVisible();
  });
});
