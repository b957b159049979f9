"""Test-only scheduler preload: the dashboard's HTTP server answers ``/clustermgr-test/headers`` with the request headers it got."""

from tornado import web


class EchoHeaders(web.RequestHandler):
    def get(self):
        self.write({name.lower(): value for name, value in self.request.headers.get_all()})


def dask_setup(scheduler):
    scheduler.http_application.add_handlers(r".*", [(r"/clustermgr-test/headers", EchoHeaders)])
