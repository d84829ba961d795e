"""launch plans: a signature's plan, kept so a new process neither plans nor generates code

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 20:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "launch_plans",
        sa.Column("plan_key", sa.String(length=64), nullable=False),
        sa.Column("env_key", sa.String(length=64), nullable=False),
        sa.Column("fusion_id", sa.String(length=64), nullable=False),
        sa.Column("plan_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("plan_key"),
    )


def downgrade() -> None:
    op.drop_table("launch_plans")
