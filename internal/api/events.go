package api

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// addEventConversions registers the conversions between events.k8s.io/v1
// Events and their hub, the core/v1 Event, field for field as kube-apiserver
// maps them (regarding <-> involvedObject, note <-> message, ...).
func addEventConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*eventsv1.Event)(nil), (*corev1.Event)(nil), func(a, b interface{}, _ conversion.Scope) error {
		eventToCore(a.(*eventsv1.Event), b.(*corev1.Event))
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*corev1.Event)(nil), (*eventsv1.Event)(nil), func(a, b interface{}, _ conversion.Scope) error {
		coreToEvent(a.(*corev1.Event), b.(*eventsv1.Event))
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*eventsv1.EventList)(nil), (*corev1.EventList)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*eventsv1.EventList), b.(*corev1.EventList)
		out.ListMeta = in.ListMeta
		out.Items = make([]corev1.Event, len(in.Items))
		for i := range in.Items {
			eventToCore(&in.Items[i], &out.Items[i])
		}
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*corev1.EventList)(nil), (*eventsv1.EventList)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*corev1.EventList), b.(*eventsv1.EventList)
		out.ListMeta = in.ListMeta
		out.Items = make([]eventsv1.Event, len(in.Items))
		for i := range in.Items {
			coreToEvent(&in.Items[i], &out.Items[i])
		}
		return nil
	})
}

func eventToCore(in *eventsv1.Event, out *corev1.Event) {
	*out = corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
}

func coreToEvent(in *corev1.Event, out *eventsv1.Event) {
	*out = eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
}
