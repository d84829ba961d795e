"""binary sources, tuning histories, daemon workers

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 14:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("binaries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source", sa.Text(), nullable=True))
    with op.batch_alter_table("tuned_records", schema=None) as batch_op:
        batch_op.add_column(sa.Column("history_json", sa.Text(), nullable=True))
    op.create_table(
        "daemon_workers",
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("device", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("jobs_done", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("owner"),
    )


def downgrade() -> None:
    op.drop_table("daemon_workers")
    with op.batch_alter_table("tuned_records", schema=None) as batch_op:
        batch_op.drop_column("history_json")
    with op.batch_alter_table("binaries", schema=None) as batch_op:
        batch_op.drop_column("source")
