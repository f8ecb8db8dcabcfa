package chart

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// regions shades each region over the whole height of a panel and, with
// labels, writes its label at its top left (labels of successive regions
// a line lower each, three lines deep, so neighbours do not overwrite
// each other).
type regions struct {
	rs     []Region
	labels bool
}

func (r regions) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := textStyle(p, 9, text.XLeft, text.YTop)
	sty.Color = messageColor
	line := sty.Height("Mg")
	for i, rg := range r.rs {
		x0, x1 := trX(rg.Start.Seconds()), trX(rg.End.Seconds())
		c.SetColor(regionColor)
		var path vg.Path
		path.Move(vg.Point{X: x0, Y: c.Min.Y})
		path.Line(vg.Point{X: x1, Y: c.Min.Y})
		path.Line(vg.Point{X: x1, Y: c.Max.Y})
		path.Line(vg.Point{X: x0, Y: c.Max.Y})
		path.Close()
		c.Fill(path)
		if r.labels && rg.Label != "" {
			c.FillText(sty, vg.Point{X: x0 + 2, Y: c.Max.Y - 2 - vg.Length(i%3)*line}, rg.Label)
		}
	}
}

// DataRange makes the time axis hold every region.
func (r regions) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = 0, 0
	for _, rg := range r.rs {
		xmax = max(xmax, rg.End.Seconds())
	}
	return xmin, xmax, 0, 0
}

// targetLine draws the target rate across the panel, its label above the
// line at the right.
type targetLine struct{ t Target }

func (t targetLine) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(t.t.Rate)
	c.StrokeLine2(draw.LineStyle{Color: targetColor, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}},
		c.Min.X, y, c.Max.X, y)
	sty := textStyle(p, 9, text.XRight, text.YBottom)
	sty.Color = targetColor
	c.FillText(sty, vg.Point{X: c.Max.X - 2, Y: y + 2}, t.t.Label)
}

// message writes its text in the middle of the panel.
type message struct{ text string }

func (m message) Plot(c draw.Canvas, p *plot.Plot) {
	sty := textStyle(p, 14, text.XCenter, text.YCenter)
	sty.Color = messageColor
	c.FillText(sty, c.Center(), m.text)
}

// textStyle returns the panel's tick label style at size points, aligned.
func textStyle(p *plot.Plot, size vg.Length, x text.XAlignment, y text.YAlignment) text.Style {
	sty := p.X.Tick.Label
	sty.Font.Size = size
	sty.XAlign, sty.YAlign = x, y
	return sty
}
