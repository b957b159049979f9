"""Test-only scheduler preload: ``/clustermgr-test/probe`` counts the requests that reached the dashboard,
``/clustermgr-test/probe-count`` says how many did (without counting itself), ``/clustermgr-test/query`` echoes the query."""

from tornado import web

REACHED = {"probe": 0}


class Probe(web.RequestHandler):
    def get(self):
        REACHED["probe"] += 1
        self.write(REACHED)


class ProbeCount(web.RequestHandler):
    def get(self):
        self.write(REACHED)


class Query(web.RequestHandler):
    def get(self):
        self.write({"query": self.request.query})


def dask_setup(scheduler):
    scheduler.http_application.add_handlers(
        r".*",
        [
            (r"/clustermgr-test/probe", Probe),
            (r"/clustermgr-test/probe-count", ProbeCount),
            (r"/clustermgr-test/query", Query),
        ],
    )
