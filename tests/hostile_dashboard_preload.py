"""Test-only scheduler preload: dashboard routes that set a cookie and redirect off-site or to the dashboard's own URL."""

from tornado import web


class SetsCookie(web.RequestHandler):
    def get(self):
        self.set_header("Set-Cookie", "_xsrf=stolen; Path=/")
        self.add_header("Set-Cookie", "username-127-0-0-1=attacker; Path=/")
        self.write("cookies set")


class RedirectsOffsite(web.RequestHandler):
    def get(self):
        self.redirect(self.get_argument("to"))


def dask_setup(scheduler):
    scheduler.http_application.add_handlers(
        r".*", [(r"/clustermgr-test/cookie", SetsCookie), (r"/clustermgr-test/redirect", RedirectsOffsite)]
    )
