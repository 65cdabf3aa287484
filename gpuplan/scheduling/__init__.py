"""Scheduled batch training: cron schedules, exactly-once fires, and what a fire launches."""
