# Step 4: a PDF report with reportlab: a title, the summary table and both
# charts.
import pandas as pd
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.platypus import Image, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

summary = pd.read_csv("/mnt/data/summary_by_channel.csv")
styles = getSampleStyleSheet()
doc = SimpleDocTemplate("/mnt/data/marketing_report.pdf", pagesize=A4, title="Marketing performance")
rows = [list(summary.columns)] + summary.astype(str).values.tolist()
table = Table(rows, hAlign="LEFT")
table.setStyle(TableStyle([
    ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#1f4e79")),
    ("TEXTCOLOR", (0, 0), (-1, 0), colors.white),
    ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
    ("FONTSIZE", (0, 0), (-1, -1), 8),
]))
best = summary.sort_values("roas", ascending=False).iloc[0]
story = [
    Paragraph("Marketing performance report", styles["Title"]),
    Paragraph(f"Best return on ad spend: <b>{best['channel']}</b> (ROAS {best['roas']:.2f}).", styles["Normal"]),
    Spacer(1, 0.4 * cm),
    table,
    Spacer(1, 0.6 * cm),
    Image("/mnt/data/revenue_by_channel.png", width=16 * cm, height=9 * cm),
    Image("/mnt/data/weekly_roas.png", width=16 * cm, height=9 * cm),
]
doc.build(story)
print("report: marketing_report.pdf")
