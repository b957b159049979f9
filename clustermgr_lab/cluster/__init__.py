"""One managed cluster at run time: lifecycle, reconciler, adaptive loop, scheduler link, events and logs."""
