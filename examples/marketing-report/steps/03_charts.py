# Step 3 (the fix): use the real column names and draw two seaborn charts.
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

sns.set_theme(style="whitegrid")
df = pd.read_csv("/mnt/data/marketing.csv", parse_dates=["date"])

totals = df.groupby("channel", as_index=False)["revenue"].sum().sort_values("revenue", ascending=False)
fig, ax = plt.subplots(figsize=(7, 4))
sns.barplot(data=totals, x="channel", y="revenue", color="#1f77b4", ax=ax)
ax.set_title("Revenue by channel")
ax.set_ylabel("Revenue (USD)")
fig.tight_layout()
fig.savefig("/mnt/data/revenue_by_channel.png", dpi=120)

weekly = (
    df.groupby(["channel", pd.Grouper(key="date", freq="W")])[["spend", "revenue"]]
    .sum()
    .reset_index()
)
weekly["roas"] = weekly["revenue"] / weekly["spend"]
fig, ax = plt.subplots(figsize=(7, 4))
sns.lineplot(data=weekly, x="date", y="roas", hue="channel", marker="o", ax=ax)
ax.set_title("Weekly return on ad spend")
ax.set_ylabel("ROAS")
fig.autofmt_xdate()
fig.tight_layout()
fig.savefig("/mnt/data/weekly_roas.png", dpi=120)
print("charts: revenue_by_channel.png, weekly_roas.png")
